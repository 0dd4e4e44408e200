# Builds and runs subsync. Not used by the tests; see docker-compose.yml.
FROM swift:6.2-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends libpq-dev libcurl4-openssl-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Package.swift ./
COPY Sources ./Sources
COPY Tests ./Tests
COPY Benchmarks ./Benchmarks
RUN swift build -c release --product subsync --static-swift-stdlib \
    && cp .build/release/subsync /usr/local/bin/subsync

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends libpq5 libcurl4 ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 subsync
COPY --from=build /usr/local/bin/subsync /usr/local/bin/subsync
COPY Sources/SyncCore/Resources/catalogue /etc/subsync/catalogue
USER subsync
ENV SUBSYNC_HOST=0.0.0.0 SUBSYNC_PORT=8080
EXPOSE 8080
ENTRYPOINT ["subsync"]
CMD ["serve"]
