package main_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/infrakit/infrakit/sdk/providertest"
)

// builder builds each binary the tests run once.
var builder *providertest.Builder

func TestMain(m *testing.M) {
	builder = providertest.NewBuilder()
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		builder.Close()
		os.Exit(code)
	}))
}
