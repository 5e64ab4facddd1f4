# The kcm image. The build has no .git, so the commit comes in as an
# argument, as the release workflow passes it:
#   docker build -t ghcr.io/kcm-project/kcm:0.1.0 \
#     --build-arg KCM_GIT_COMMIT="$(git rev-parse HEAD)" \
#     --build-arg KCM_GIT_TREE_STATE="$(test -z "$(git status --porcelain)" && echo clean || echo dirty)" \
#     --build-arg SOURCE_DATE_EPOCH="$(git log -1 --format=%ct)" .
# `kcm --version` and the kcm_build_info metric report them; without them,
# the commit reads "unknown".
FROM debian:bookworm AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      gcc libc6-dev make cmake pkg-config libcurl4-openssl-dev libssl-dev libjson-c-dev libyaml-dev libuv1-dev \
      ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY include include
COPY src src
COPY manifests manifests
ARG KCM_GIT_COMMIT=unknown
ARG KCM_GIT_TREE_STATE=unknown
ARG SOURCE_DATE_EPOCH
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
      -DKCM_GIT_COMMIT="${KCM_GIT_COMMIT}" -DKCM_GIT_TREE_STATE="${KCM_GIT_TREE_STATE}" \
 && cmake --build build -j"$(nproc)" --target kcm \
 && strip build/kcm \
 && build/kcm --version
# The runtime's root: kcm and kubectl-kcm (a link to it, for `kubectl kcm
# why`), the shared libraries it loads (ldd's list, the loader included),
# the CA bundle and a non-root user. Nothing else: no shell, no package
# manager.
RUN set -e; r=/rootfs; \
    mkdir -p $r/usr/local/bin $r/etc/ssl/certs $r/tmp; \
    cp build/kcm $r/usr/local/bin/kcm; \
    ln -s kcm $r/usr/local/bin/kubectl-kcm; \
    for lib in $(ldd build/kcm | awk '$2 == "=>" { print $3 } $1 ~ /^\// { print $1 }'); do \
      cp --parents -L "$lib" $r; \
    done; \
    cp /etc/ssl/certs/ca-certificates.crt $r/etc/ssl/certs/; \
    printf 'root:x:0:0:root:/root:/nonexistent\nnonroot:x:65532:65532:nonroot:/nonexistent:/nonexistent\n' >$r/etc/passwd; \
    printf 'root:x:0:\nnonroot:x:65532:\n' >$r/etc/group; \
    chmod 1777 $r/tmp; \
    chroot $r /usr/local/bin/kcm --version

FROM scratch
COPY --from=build /rootfs /
ARG KCM_GIT_COMMIT=unknown
LABEL org.opencontainers.image.title="kcm" \
      org.opencontainers.image.description="Kubernetes controller-manager for Deployments and ReplicaSets" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/kcm-project/kcm" \
      org.opencontainers.image.revision="${KCM_GIT_COMMIT}"
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/kcm"]
