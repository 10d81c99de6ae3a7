package etcdtest

import (
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Client connects to endpoints; it is closed at the test's cleanup.
func Client(t testing.TB, endpoints []string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Prefix is a key prefix of the test's own, so tests sharing one server
// never see each other's keys.
func Prefix(t testing.TB) string {
	return "/test/" + strings.ReplaceAll(t.Name(), "/", "_")
}
