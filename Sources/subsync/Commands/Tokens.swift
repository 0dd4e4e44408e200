import ArgumentParser
import Foundation
import Postgres
import SyncService
import SyncStore

struct Tokens: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tokens",
        abstract: "Account tokens for devices.",
        subcommands: [Mint.self, Revoke.self]
    )

    struct Mint: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "mint",
            abstract: "Print an account token (HS256 JWT) for development and testing.",
            discussion: """
                Signs with $SUBSYNC_TOKEN_SECRET. Production apps get their tokens from the app's \
                own backend, which shares that secret. --ttl may not exceed \
                $SUBSYNC_TOKEN_MAX_LIFETIME (30 days by default), which serve enforces.

                Examples:
                  SUBSYNC_TOKEN_SECRET=... subsync tokens mint --account user-42
                  subsync tokens mint --account user-42 --ttl 3600
                """
        )

        @Option(help: "The account the token may act on.")
        var account: String

        @Option(help: "Lifetime in seconds.")
        var ttl: Int = 86_400

        func validate() throws {
            let maximum = Int((try? ServiceConfiguration.tokenMaximumLifetime(from: ProcessInfo.processInfo.environment))
                ?? Authenticator.defaultMaximumLifetime)
            guard (1...maximum).contains(ttl) else {
                throw ValidationError("--ttl must be from 1 to \(maximum) seconds (SUBSYNC_TOKEN_MAX_LIFETIME: serve refuses longer-lived tokens)")
            }
            guard (1...128).contains(account.utf8.count) else {
                throw ValidationError("--account must be 1 to 128 characters")
            }
        }

        func run() async throws {
            guard let secret = ProcessInfo.processInfo.environment["SUBSYNC_TOKEN_SECRET"], secret.utf8.count >= 32 else {
                printError("SUBSYNC_TOKEN_SECRET must be set to at least 32 bytes")
                throw ExitCodes.usage
            }
            let authenticator = await Authenticator(adminKey: nil, tokenSecret: secret)
            print(try await authenticator.mint(accountID: account, validFor: TimeInterval(ttl)))
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "revoke",
            abstract: "Refuse every device token of an account issued until now (a lost or stolen device).",
            discussion: """
                Tokens issued before now (by their iat; one without iat counts as before) are \
                refused with 401 token_revoked; tokens issued afterwards work, so the app's backend \
                hands the user's devices new ones. Running serve processes see it within seconds. \
                Recorded in the audit log (operator_actions).

                Examples:
                  subsync tokens revoke --account user-42 --reason "phone stolen, ticket 881"
                """
        )

        @OptionGroup var database: DatabaseOptions
        @Option(help: "The account whose tokens are revoked.") var account: String
        @Option(help: "Who (recorded; default $USER).") var actor: String?
        @Option(help: "Why (recorded).") var reason: String?
        @Flag(help: "Print machine-readable JSON instead of text.") var json = false

        func validate() throws {
            guard (1...128).contains(account.utf8.count), !account.contains(where: { $0.isNewline || $0 == "\u{0}" }) else {
                throw ValidationError("--account must be 1 to 128 characters")
            }
        }

        func run() async throws {
            let actor = Operator.actor(actor)
            try await Operator.withPool(database, label: "subsync.tokens") { pool in
                let revocation = try await TokenRevocations(pool: pool).revoke(account, at: Date(), actor: actor, reason: reason)
                if json {
                    try printJSON(revocation)
                } else {
                    print("account \(account): device tokens issued before \(RFC3339.format(revocation.revokedBefore)) are refused (recorded as #\(revocation.audit.id) by \(actor))")
                }
            }
        }
    }
}
