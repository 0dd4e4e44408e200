import ArgumentParser

@main
struct Subsync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "subsync",
        abstract: "Keeps one truth about every account's subscriptions across its devices.",
        discussion: """
            Exit codes: 0 success; 1 failure; 64 bad usage; 65 data error (for example a changed \
            migration file); 69 database unavailable.
            """,
        subcommands: [Serve.self, Migrate.self, Tokens.self]
    )
}
