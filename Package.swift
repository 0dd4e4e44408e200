// swift-tools-version:6.2
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "subsync",
    // The dependencies' floors (jwt-kit: macOS 13, iOS 15): nothing in the package asks for more
    // (no Synchronization.Mutex, Atomic or UInt128, which need macOS 15). The client libraries
    // are built for iOS; the server's targets never are (swift-prometheus alone asks iOS 16).
    // docs/CLIENT.md, "Platforms"; scripts/check-package checks both.
    platforms: [.macOS(.v13), .iOS(.v15)],
    products: [
        .executable(name: "subsync", targets: ["subsync"]),
        .library(name: "Postgres", targets: ["Postgres"]),
        .library(name: "SyncCore", targets: ["SyncCore"]),
        // What apps and their backends link (docs/CLIENT.md); neither imports server code.
        .library(name: "SubsyncClient", targets: ["SubsyncClient"]),
        .library(name: "SubsyncWebhooks", targets: ["SubsyncWebhooks"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-atomics.git", from: "1.3.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.8.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        // Imported by SyncService directly (they also come with Hummingbird and X509).
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
    ],
    targets: [
        // MARK: C libraries
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),

        // MARK: Swift wrappers of the C libraries
        .target(
            name: "Postgres",
            dependencies: [
                "CLibPQ",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "Curl",
            dependencies: [
                "CCurl",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: The domain
        .target(
            name: "SyncCore",
            // The default catalogue (Catalogue+Default.swift), compiled in.
            resources: [.embedInCode("Resources/catalogue/default.json")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "SyncStore",
            dependencies: [
                "Postgres",
                "SyncCore",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            // The migrations, compiled into the binary (Migration+Embedded.swift); the schema's
            // reading copy beside them is not one.
            exclude: ["Migrations/sql/schema.sql"],
            resources: [.embedInCode("Migrations/sql")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "SyncService",
            dependencies: [
                "Postgres",
                "SyncCore",
                "SyncStore",
                "Curl",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Atomics", package: "swift-atomics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            resources: [
                .embedInCode("Resources/openapi.yaml"),
                // The operator console (GET /console): served from the binary, no files beside it.
                .embedInCode("Resources/console/console.html"),
                .embedInCode("Resources/console/console.js"),
                .embedInCode("Resources/console/console.css"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "subsync",
            dependencies: [
                "Curl",
                "Postgres",
                "SyncStore",
                "SyncService",
                "SyncCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Atomics", package: "swift-atomics"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: Client libraries (Foundation only; swift-crypto for the webhooks)
        .target(
            name: "SubsyncClient",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "SubsyncWebhooks",
            dependencies: [.product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),

        // MARK: Benchmarks (run by scripts/bench/*, never by the tests)
        .executableTarget(
            name: "ClientBenchmark",
            dependencies: ["SubsyncClient"],
            path: "Benchmarks/ClientBenchmark",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "HTTPBenchmark",
            dependencies: ["Curl"],
            path: "Benchmarks/HTTPBenchmark",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "ResolverBenchmark",
            dependencies: ["SyncCore"],
            path: "Benchmarks/ResolverBenchmark",
            swiftSettings: swiftSettings
        ),

        // MARK: Tests
        .target(
            name: "TestSupport",
            dependencies: [
                "Curl",
                "Postgres",
                "SubsyncWebhooks",
                "SyncCore",
                "SyncService",
                "SyncStore",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            path: "Tests/TestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PostgresTests",
            dependencies: ["Postgres", "TestSupport", .product(name: "PropertyBased", package: "swift-property-based")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CurlTests",
            dependencies: [
                "Curl",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "PropertyBased", package: "swift-property-based"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SyncCoreTests",
            dependencies: [
                "SyncCore",
                "Postgres",
                "TestSupport",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SyncStoreTests",
            dependencies: [
                "Postgres",
                "SyncStore",
                "SyncCore",
                "TestSupport",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SubsyncClientTests",
            dependencies: ["SubsyncClient"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SubsyncWebhooksTests",
            dependencies: ["SubsyncWebhooks"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SyncServiceTests",
            dependencies: [
                "SubsyncClient",
                "SubsyncWebhooks",
                "SyncService",
                "Postgres",
                "TestSupport",
                "SyncCore",
                "SyncStore",
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
                "Curl",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: swiftSettings
        ),
        // The `subsync` command line, run as a process: serve, migrate and the operator commands.
        .testTarget(
            name: "SubsyncCommandTests",
            dependencies: [
                "Postgres",
                "SyncCore",
                "SyncService",
                "SyncStore",
                "TestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
