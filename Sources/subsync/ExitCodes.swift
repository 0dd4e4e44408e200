import ArgumentParser

/// Exit codes scripts can rely on (docs/OPERATIONS.md, "Exit codes"). They follow BSD sysexits where one fits.
enum ExitCodes {
    static let failure = ExitCode(1)
    /// `reconcile --dry-run` found drift (for monitoring: the database needs a repair).
    static let drift = ExitCode(2)
    /// Interrupted by SIGINT after saving a checkpoint (`reconcile --all --resume` goes on).
    static let interrupted = ExitCode(130)
    static let usage = ExitCode(64)
    /// The named thing (endpoint, delivery, account) does not exist.
    static let notFound = ExitCode(66)
    static let dataError = ExitCode(65)
    static let unavailable = ExitCode(69)
    /// Nothing changed, for now: try again shortly (`deliveries cancel` of a delivery being sent).
    static let temporaryFailure = ExitCode(75)
}
