package main_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/infrakit/infrakit/plugins/docker/dockertest"
	"github.com/infrakit/infrakit/plugins/docker/engine"
	"github.com/infrakit/infrakit/sdk/providertest"
)

// The tests build the provider once and the web image (FROM scratch, see
// testdata/docker) once; image is "" when Docker is not usable here, and
// skipReason says why.
// suiteLabel is the label the conformance suite's containers get from their
// properties, valued dockertest.RunLabel().
const suiteLabel = "com.example.suite"

var (
	builder    *providertest.Builder
	client     *engine.Client
	image      string
	skipReason string
)

func TestMain(m *testing.M) {
	builder = providertest.NewBuilder()
	code := func() int {
		defer builder.Close()
		c, err := dockertest.Client()
		if err != nil {
			skipReason = err.Error()
			return m.Run()
		}
		defer c.Close()
		client = c
		tag := dockertest.Tag("conformance")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := dockertest.BuildWebImage(ctx, c, tag); err != nil {
			fmt.Fprintln(os.Stderr, "build the test image:", err)
			return 1
		}
		image = tag
		code := m.Run()
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		// The suite's containers carry this process's suite label (other
		// runs beside this one, on the same Docker, carry theirs).
		if n, err := dockertest.RemoveLabelled(cctx, c, suiteLabel+"="+dockertest.RunLabel()); err != nil || n > 0 {
			fmt.Fprintf(os.Stderr, "removed %d containers the suite left behind (%v)\n", n, err)
			if code == 0 {
				code = 1
			}
		}
		if err := c.ImageRemove(cctx, tag, true); err != nil {
			fmt.Fprintln(os.Stderr, "remove the test image:", err)
		}
		return code
	}()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
