extension Catalogue {
    /// Whether `state` allows `feature`, and the lowest tier that would.
    ///
    /// Allowed means the feature is in `state.features` (the resolved tier's inherited features),
    /// so the answer agrees with what `GET /v1/accounts/{id}` shows.
    public func check(feature: String, state: AccountState) throws(FeatureCheckError) -> FeatureCheck {
        guard let requiredRank = lowestTierRankByFeature[feature] else {
            throw FeatureCheckError.unknownFeature(feature)
        }
        return FeatureCheck(
            feature: feature,
            allowed: state.features.contains(feature),
            requiredTier: tiers[requiredRank].id,
            currentTier: state.tier)
    }

    /// The lowest tier that includes `feature`, or `nil` if no tier does.
    public func requiredTier(for feature: String) -> Tier? {
        lowestTierRankByFeature[feature].map { tiers[$0] }
    }
}
