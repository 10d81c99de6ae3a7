package api

import (
	"testing"

	"go.uber.org/goleak"
)

// Sessions run commands in goroutines the Server owns: none may outlive
// Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
