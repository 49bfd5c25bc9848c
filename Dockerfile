# csi-registrar: one static binary, both roles. Build the root first with
# `make bin/rootfs` (or just `make image`); nothing is pulled.
FROM scratch
ARG VERSION=dev
LABEL org.opencontainers.image.title="csi-registrar" \
      org.opencontainers.image.description="Kubelet plugin registrar for CSI drivers (drop-in for node-driver-registrar) and a reference CSI node driver" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
# /csi-registrar and /csi-node-driver-registrar (a symlink to it: the binary
# picks the register role from that name).
COPY bin/rootfs/ /
# uid 0: the kubelet's plugins_registry is root-owned 0750. Run it with all
# capabilities dropped (see manifests/).
USER 0:0
ENTRYPOINT ["/csi-registrar", "register"]
