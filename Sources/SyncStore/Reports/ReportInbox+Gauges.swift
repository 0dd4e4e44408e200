import Postgres

extension ReportInbox {
    /// The inbox as `/metrics` and the console's chart show it.
    public struct Gauges: Sendable, Equatable {
        /// Reports waiting for a worker.
        public var pendingReports: Int
        /// Seconds since the oldest pending report was received; 0 when none is pending.
        public var resolutionLagSeconds: Double
        /// Reports set aside after failing every attempt (`subsync quarantine`).
        public var quarantinedReports: Int

        public init(pendingReports: Int, resolutionLagSeconds: Double, quarantinedReports: Int) {
            self.pendingReports = pendingReports
            self.resolutionLagSeconds = resolutionLagSeconds
            self.quarantinedReports = quarantinedReports
        }
    }

    /// Reads the gauges in one statement, the database's clock for the lag.
    public func gauges() async throws -> Gauges {
        let rows = try await pool.preparedQuery(
            """
            SELECT
                (SELECT count(*) FROM reports WHERE status = 'pending'),
                COALESCE(EXTRACT(EPOCH FROM now() - \(unescaped: Self.oldestPendingReceivedAtSQL)), 0)::float8,
                (SELECT count(*) FROM reports WHERE status = 'quarantined')
            """
        )
        return Gauges(
            pendingReports: try rows[0].decode(Int.self, at: 0),
            resolutionLagSeconds: try rows[0].decode(Double.self, at: 1),
            quarantinedReports: try rows[0].decode(Int.self, at: 2))
    }
}
