# drydock-agent from a locally built static binary (no registry needed);
# deploy/build-images.sh makes the context: the binary and an empty `state/`.
# Everything after the COPY lines must match the `agent` stage of
# deploy/Dockerfile (tests/e2e/deploy.rs checks it).
FROM scratch
COPY drydock-agent /drydock-agent
COPY --chown=65533:65533 state/ /var/lib/drydock/
# Not root, and not the executor's user either: on the host, a process
# escaping this container owns none of the executor's files.
USER 65533:65533
ENV DRYDOCK_AGENT_CONFIG=/etc/drydock/agent.yaml \
    DRYDOCK_AGENT_LISTEN=0.0.0.0:7420
EXPOSE 7420
# drydock never shows or acts on a container with this label.
LABEL io.drydock.role="agent"
ENTRYPOINT ["/drydock-agent"]
CMD ["serve"]
