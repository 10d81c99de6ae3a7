package config_test

import (
	"testing"
)

// hclwrite writes an object whose first key is "for" as `{ for = ... }`,
// which reads back as a for expression; MarshalHCL must quote it.
func TestMarshalHCLQuotesForKeys(t *testing.T) {
	st := mustLoad(t, `
stack "s" {}
provider "simulator" {}
group "g" {
  size = 1
  tags = { "for" = "x" }
  instance {
    provider   = simulator
    type       = "compute"
    properties = { "for" = { "for" = 1, in = 2 }, list = [{ "for" = true }] }
  }
  flavor { provider = simulator }
}
`)
	out, err := st.MarshalHCL()
	if err != nil {
		t.Fatal(err)
	}
	again := mustLoad(t, string(out))
	assertSameModel(t, clearSource(again), clearSource(st))
}
