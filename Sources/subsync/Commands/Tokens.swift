import ArgumentParser
import Foundation
import Postgres
import SyncService
import SyncStore

struct Tokens: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tokens",
        abstract: "Account tokens for devices.",
        subcommands: [Mint.self, Revoke.self, Unrevoke.self]
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
            let maximum: Int
            do {
                maximum = Int(try ServiceConfiguration.tokenMaximumLifetime(from: ProcessInfo.processInfo.environment))
            } catch {
                throw ValidationError("\(error)")
            }
            guard (1...maximum).contains(ttl) else {
                throw ValidationError("--ttl must be from 1 to \(maximum) seconds (SUBSYNC_TOKEN_MAX_LIFETIME: serve refuses longer-lived tokens)")
            }
            guard (1...128).contains(account.utf8.count) else {
                throw ValidationError("--account must be 1 to 128 characters")
            }
        }

        func run() async throws {
            guard let secret = (try? ServiceConfiguration.tokenSecret(from: ProcessInfo.processInfo.environment)) ?? nil else {
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
                Tokens issued before now (by their iat; one without iat counts as before), by the \
                database's clock and a minute more for issuers' clocks, are refused with 401 \
                token_revoked; tokens issued afterwards work, so the app's backend hands the \
                user's devices new ones. Running serve processes see it within seconds. Recorded \
                in the audit log (operator_actions). Tokens name only the account: end the stolen \
                device's session in your backend first, or it is handed a new token too. \
                `subsync tokens unrevoke` takes a revocation back.

                Examples:
                  subsync tokens revoke --account user-42 --reason "phone stolen, ticket 881"
                """
        )

        @OptionGroup var target: Target
        @Flag(help: "Print machine-readable JSON instead of text.") var json = false

        func run() async throws {
            let (account, actor, reason) = (target.account, Operator.actor(target.actor), target.reason)
            try await Operator.withPool(target.database, label: "subsync.tokens") { pool in
                if try await pool.preparedQuery("SELECT 1 FROM account_states WHERE account_id = \(account)").isEmpty {
                    printError("note: no account \(account) has synced yet (account ids are case-sensitive); revoking its tokens anyway")
                }
                let revocation = try await TokenRevocations(pool: pool).revoke(account, actor: actor, reason: reason)
                if json {
                    try printJSON(revocation)
                } else {
                    print("account \(account): device tokens issued before \(RFC3339.format(revocation.revokedBefore)) are refused (recorded as #\(revocation.audit.id) by \(actor))")
                }
            }
        }
    }

    struct Unrevoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "unrevoke",
            abstract: "Take back a revocation of an account's device tokens (made by mistake).",
            discussion: """
                The account's tokens count again by their expiry alone; running serve processes \
                see it within seconds. Recorded in the audit log. Exit 66 when the account's \
                tokens were not revoked.

                Example:
                  subsync tokens unrevoke --account user-42 --reason "wrong account, ticket 882"
                """
        )

        @OptionGroup var target: Target

        func run() async throws {
            let (account, actor, reason) = (target.account, Operator.actor(target.actor), target.reason)
            try await Operator.withPool(target.database, label: "subsync.tokens") { pool in
                guard let audit = try await TokenRevocations(pool: pool).unrevoke(account, actor: actor, reason: reason) else {
                    printError("the tokens of account \(account) are not revoked")
                    throw ExitCodes.notFound
                }
                print("account \(account): its tokens count by their expiry again (recorded as #\(audit.id) by \(actor))")
            }
        }
    }

    /// The account a revocation is about, who and why: an account id as the API takes them, and
    /// a reason without control characters.
    struct Target: ParsableArguments {
        @OptionGroup var database: DatabaseOptions
        @Option(help: "The account whose device tokens this is about.") var account: String
        @Option(help: "Who (recorded; default $USER).") var actor: String?
        @Option(help: "Why (recorded).") var reason: String?

        func validate() throws {
            guard Identifier.isValid(account) else {
                throw ValidationError("--account must be 1 to 128 characters of letters, digits and ._:@-")
            }
            if let reason, reason.isEmpty || reason.count > 500
                || reason.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) })
            {
                throw ValidationError("--reason must be 1 to 500 characters without control characters")
            }
        }
    }
}
