import Foundation

/// The answers of the App Store Server API endpoints subsync calls, in Apple's shapes (field names
/// as Apple spells them). Signed fields are kept as the JWS text: callers verify every one with
/// the same ``StoreKitVerifier`` as device reports and notifications before using it.
public enum AppStoreAPI {
    /// Get All Subscription Statuses (`StatusResponse`).
    public struct StatusResponse: Decodable, Sendable, Equatable {
        public var environment: String?
        public var bundleId: String?
        public var appAppleId: Int64?
        public var data: [SubscriptionGroup]

        public struct SubscriptionGroup: Decodable, Sendable, Equatable {
            public var subscriptionGroupIdentifier: String?
            public var lastTransactions: [LastTransaction]
        }

        public struct LastTransaction: Decodable, Sendable, Equatable {
            /// 1 active, 2 expired, 3 billing retry, 4 grace period, 5 revoked.
            public var status: Int?
            public var originalTransactionId: String?
            public var signedTransactionInfo: String?
            public var signedRenewalInfo: String?
        }

        enum CodingKeys: String, CodingKey { case environment, bundleId, appAppleId, data }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            environment = try container.decodeIfPresent(String.self, forKey: .environment)
            bundleId = try container.decodeIfPresent(String.self, forKey: .bundleId)
            appAppleId = try container.decodeIfPresent(Int64.self, forKey: .appAppleId)
            data = try container.decodeIfPresent([SubscriptionGroup].self, forKey: .data) ?? []
        }
    }

    /// Get Transaction History v2 (`HistoryResponse`) and Get Refund History
    /// (`RefundHistoryResponse`): a page of signed transactions.
    public struct TransactionPage: Decodable, Sendable, Equatable {
        public var signedTransactions: [String]
        /// Where the next page starts.
        public var revision: String?
        public var hasMore: Bool

        enum CodingKeys: String, CodingKey { case signedTransactions, revision, hasMore }

        public init(signedTransactions: [String], revision: String?, hasMore: Bool) {
            self.signedTransactions = signedTransactions
            self.revision = revision
            self.hasMore = hasMore
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            signedTransactions = try container.decodeIfPresent([String].self, forKey: .signedTransactions) ?? []
            revision = try container.decodeIfPresent(String.self, forKey: .revision)
            hasMore = try container.decodeIfPresent(Bool.self, forKey: .hasMore) ?? false
        }
    }

    /// Get Notification History (`NotificationHistoryResponse`).
    public struct NotificationHistoryPage: Decodable, Sendable, Equatable {
        public var notificationHistory: [NotificationHistoryItem]
        public var paginationToken: String?
        public var hasMore: Bool

        enum CodingKeys: String, CodingKey { case notificationHistory, paginationToken, hasMore }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            notificationHistory = try container.decodeIfPresent([NotificationHistoryItem].self, forKey: .notificationHistory) ?? []
            paginationToken = try container.decodeIfPresent(String.self, forKey: .paginationToken)
            hasMore = try container.decodeIfPresent(Bool.self, forKey: .hasMore) ?? false
        }
    }

    /// One notification Apple sent (or tried to), as `POST /v1/notifications/apple` receives it.
    public struct NotificationHistoryItem: Decodable, Sendable, Equatable {
        public var signedPayload: String
        public var sendAttempts: [SendAttempt]?
    }

    public struct SendAttempt: Decodable, Sendable, Equatable {
        /// Milliseconds since 1970.
        public var attemptDate: Double?
        public var sendAttemptResult: String?
    }

    /// Request a Test Notification (`SendTestNotificationResponse`).
    public struct TestNotificationRequested: Decodable, Sendable, Equatable {
        public var testNotificationToken: String
    }

    /// Get Test Notification Status (`CheckTestNotificationResponse`).
    public struct TestNotificationStatus: Decodable, Sendable, Equatable {
        public var signedPayload: String?
        public var sendAttempts: [SendAttempt]?
    }

    /// Apple's error body.
    struct ErrorBody: Decodable {
        var errorCode: Int?
        var errorMessage: String?
    }
}
