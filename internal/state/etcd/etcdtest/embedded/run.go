package embedded

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// RunTests is a test package's TestMain body: it starts one server in a
// temporary directory, hands its client endpoints to use, runs the tests,
// stops the server and then, when they passed, checks that no goroutine
// was left behind (the server's own are gone by then). It returns the exit
// code for os.Exit.
func RunTests(m *testing.M, use func(endpoints []string)) int {
	dir, err := os.MkdirTemp("", "infrakit-etcd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	srv, err := Start(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	use(srv.Endpoints)
	code := m.Run()
	srv.Close()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}
