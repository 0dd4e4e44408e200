import ArgumentParser

/// Exit codes scripts can rely on (see the README). They follow BSD sysexits where one fits.
enum ExitCodes {
    static let failure = ExitCode(1)
    static let usage = ExitCode(64)
    static let dataError = ExitCode(65)
    static let unavailable = ExitCode(69)
}
