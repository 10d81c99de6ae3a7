package providertest

import (
	"io"
	"strings"
	"sync"
	"testing"
)

// LogWriter returns a writer for a provider client's logger that sends
// each line to t's log until the test ends. go-plugin's log pump may still
// write after that, which t.Log forbids, so later writes are dropped. Call
// it before starting the client: its cleanup then runs after the client's.
func LogWriter(t testing.TB) io.Writer {
	w := &logWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return w
}

type logWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}
