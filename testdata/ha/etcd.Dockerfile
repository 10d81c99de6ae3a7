# The etcd of the multi-host HA test (e2e/hadocker_test.go): the static
# one-member server of testdata/ha/etcdserver and nothing else. Build
# context: a directory holding this file (as Dockerfile) and the binary
# "etcdserver", built with CGO_ENABLED=0. No registry is involved.
FROM scratch
COPY etcdserver /etcdserver
EXPOSE 2379
ENTRYPOINT ["/etcdserver"]
