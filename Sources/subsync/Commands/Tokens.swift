import ArgumentParser
import Foundation
import SyncService

struct Tokens: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tokens",
        abstract: "Account tokens for devices.",
        subcommands: [Mint.self]
    )

    struct Mint: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "mint",
            abstract: "Print an account token (HS256 JWT) for development and testing.",
            discussion: """
                Signs with $SUBSYNC_TOKEN_SECRET. Production apps get their tokens from the app's \
                own backend, which shares that secret.

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
            guard (1...31_536_000).contains(ttl) else {
                throw ValidationError("--ttl must be from 1 to 31536000 seconds")
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
}
