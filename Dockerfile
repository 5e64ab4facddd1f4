# Build: docker build -t kcm:0.1.0 .
FROM debian:bookworm AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      gcc make cmake pkg-config libcurl4-openssl-dev libssl-dev libjson-c-dev libyaml-dev libuv1-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY include include
COPY src src
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
 && cmake --build build -j"$(nproc)" \
 && strip build/kcm

FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libcurl4 libssl3 libjson-c5 libyaml-0-2 libuv1 ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/build/kcm /usr/local/bin/kcm
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/kcm"]
