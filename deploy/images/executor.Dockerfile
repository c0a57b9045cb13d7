# drydock-executor from a locally built static binary (no registry needed);
# deploy/build-images.sh makes the context: the binary and an empty `state/`.
# Everything after the COPY lines must match the `executor` stage of
# deploy/Dockerfile (tests/e2e/deploy.rs checks it).
FROM scratch
COPY drydock-executor /drydock-executor
COPY --chown=65532:65532 state/ /var/lib/drydock/
# Not root. The Docker socket is reached through its group, which the
# deployment adds (compose: group_add with the socket's GID).
USER 65532:65532
ENV DRYDOCK_EXECUTOR_CONFIG=/etc/drydock/executor.yaml \
    DRYDOCK_EXECUTOR_LISTEN=0.0.0.0:7443 \
    DRYDOCK_AUDIT_PATH=/var/lib/drydock/audit.db \
    DRYDOCK_REVOCATIONS=/var/lib/drydock/revoked-grants \
    DRYDOCK_DOCKER_ENDPOINT=unix:///var/run/docker.sock
EXPOSE 7443
# drydock never shows or acts on a container with this label.
LABEL io.drydock.role="executor"
ENTRYPOINT ["/drydock-executor"]
CMD ["serve"]
