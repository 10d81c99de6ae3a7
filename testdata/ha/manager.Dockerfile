# A manager of the multi-host HA test (e2e/hadocker_test.go): infrakit and
# the simulator provider, both static (CGO_ENABLED=0), in an image FROM
# scratch. `infrakit init` finds the provider beside the infrakit binary.
# The working directory /stack is the manager's own (the test bind-mounts a
# directory holding testdata/ha/stack there); run with a tmpfs on /tmp,
# where go-plugin puts its sockets. Build context: a directory holding this
# file (as Dockerfile) and the two binaries.
FROM scratch
COPY infrakit infrakit-provider-simulator /opt/infrakit/bin/
ENV HOME=/stack
WORKDIR /stack
EXPOSE 24864
ENTRYPOINT ["/opt/infrakit/bin/infrakit"]
