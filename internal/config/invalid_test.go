package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/infrakit/infrakit/internal/config"
)

const invalidDir = "../../testdata/invalid"

// TestInvalidStacks loads each stack in testdata/invalid and checks the
// first error: its summary, a part of its detail and where it points. Each
// stack has exactly one error unless errors says otherwise, so one mistake
// never cascades into several messages.
func TestInvalidStacks(t *testing.T) {
	tests := []struct {
		file    string
		pos     string // file:line:col, empty for an error about no place
		summary string
		detail  string
		errors  int // 0 means 1
	}{
		{"syntax_error.hcl", "syntax_error.hcl:5:12", "Invalid multi-line string", "may not be split", 3},
		{"unknown_block.hcl", "unknown_block.hcl:3:1", "Unsupported block type", `Did you mean "group"?`, 0},
		{"unknown_attribute.hcl", "unknown_attribute.hcl:5:3", "Unsupported argument", `Did you mean "size"?`, 0},
		{"unknown_nested_block.hcl", "unknown_nested_block.hcl:3:3", "Unsupported block type", `"backend"`, 0},
		{"missing_stack.hcl", "", "Missing stack block", `stack "mystack" {}`, 0},
		{"duplicate_stack.hcl", "duplicate_stack.hcl:3:1", "Duplicate stack block", "duplicate_stack.hcl:2:1", 0},
		{"duplicate_group.hcl", "duplicate_group.hcl:12:7", "Duplicate group", "duplicate_group.hcl:4:1", 0},
		{"duplicate_provider.hcl", "duplicate_provider.hcl:4:1", "Duplicate provider", `give this block an alias`, 0},
		{"invalid_alias.hcl", "invalid_alias.hcl:3:26", "Invalid provider alias", `"nfs auth"`, 0},
		{"invalid_config_name.hcl", "invalid_config_name.hcl:3:18", "Invalid attribute name", `is not a name`, 0},
		{"reserved_provider_name.hcl", "reserved_provider_name.hcl:3:10", "Invalid provider name", `"group" is reserved`, 0},
		{"invalid_name.hcl", "invalid_name.hcl:4:7", "Invalid group name", `"my group" cannot be referenced`, 0},
		{"undeclared_provider.hcl", "undeclared_provider.hcl:4:32", "Reference to undeclared provider", "Did you mean simulator?", 0},
		{"undeclared_aliased_provider.hcl", "undeclared_aliased_provider.hcl:4:32", "Reference to undeclared provider", `provider "simulator" { alias = "nfs" }`, 0},
		{"string_reference.hcl", "string_reference.hcl:4:32", "Invalid reference", "write simulator without quotes", 0},
		{"wrong_reference_kind.hcl", "wrong_reference_kind.hcl:6:12", "Invalid reference", "a reference to a group, like group.cattle", 0},
		{"provider_reference_kind.hcl", "provider_reference_kind.hcl:4:33", "Invalid provider reference", "refers to a group, not a provider", 0},
		{"undeclared_group.hcl", "undeclared_group.hcl:13:12", "Reference to undeclared group", "Did you mean group.cattle?", 0},
		{"undeclared_loadbalancer.hcl", "undeclared_loadbalancer.hcl:14:20", "Reference to undeclared loadbalancer", `No loadbalancer named "lb9"`, 0},
		{"empty_groups.hcl", "empty_groups.hcl:8:20", "Empty reference list", "at least one group", 0},
		{"missing_required_attribute.hcl", "missing_required_attribute.hcl:6:12", "Missing required argument", `"type" is required`, 0},
		{"missing_instance.hcl", "missing_instance.hcl:4:1", "Missing instance block", "instance block", 0},
		{"duplicate_instance.hcl", "duplicate_instance.hcl:10:3", "Duplicate instance block", "duplicate_instance.hcl:6:3", 0},
		{"missing_flavor.hcl", "missing_flavor.hcl:4:1", "Missing flavor block", "at least one flavor block", 0},
		{"size_and_logical_ids.hcl", "size_and_logical_ids.hcl:6:3", "Conflicting allocation", "not both", 0},
		{"no_allocation.hcl", "no_allocation.hcl:4:1", "Missing allocation", "size = N (cattle) or logical_ids", 0},
		{"negative_size.hcl", "negative_size.hcl:5:10", "Invalid value", "at least 0; got -1", 0},
		{"wrong_type.hcl", "wrong_type.hcl:5:10", "Incorrect attribute value type", "a number is required", 0},
		{"fractional_size.hcl", "fractional_size.hcl:5:10", "Invalid value", "whole number; got 1.5", 0},
		{"duplicate_logical_id.hcl", "duplicate_logical_id.hcl:5:42", "Duplicate logical ID", "duplicate_logical_id.hcl:5:18", 0},
		{"empty_logical_ids.hcl", "empty_logical_ids.hcl:5:17", "Empty logical_ids", "size = 0", 0},
		{"invalid_update.hcl", "invalid_update.hcl:11:27", "Invalid value", `"max_parallel" must be at least 1`, 0},
		{"invalid_brake_min.hcl", "invalid_brake_min.hcl:11:24", "Invalid value", `"brake_min" must be at least 1; got 0`, 0},
		{"bad_duration.hcl", "bad_duration.hcl:11:29", "Invalid duration", `"5 minutes" is not one`, 0},
		{"bad_properties.hcl", "bad_properties.hcl:9:18", "Invalid properties", "must be an object", 0},
		{"variable_in_properties.hcl", "variable_in_properties.hcl:9:27", "Variables not allowed", "may not be used here", 0},
		{"bad_member_attribute.hcl", "bad_member_attribute.hcl:17:33", "Unsupported attribute", `"ip"`, 0},
		{"missing_target.hcl", "missing_target.hcl:12:1", "Missing target block", "target block", 0},
		{"missing_rule.hcl", "missing_rule.hcl:3:1", "Missing rule block", "at least one rule", 0},
		{"bad_protocol.hcl", "bad_protocol.hcl:19:21", "Invalid protocol", `got "websocket"`, 0},
		{"bad_port.hcl", "bad_port.hcl:19:17", "Invalid value", "between 1 and 65535; got 70000", 0},
		{"duplicate_route.hcl", "duplicate_route.hcl:25:5", "Duplicate route", "duplicate_route.hcl:17:5", 0},
		{"shared_loadbalancer.hcl", "shared_loadbalancer.hcl:25:20", "Load balancer shared by ingresses", "shared_loadbalancer.hcl:15:20", 0},
		{"reserved_tag.hcl", "reserved_tag.hcl:6:26", "Reserved tag", `"infrakit.group" cannot be set here`, 0},
		{"certificate_without_tls.hcl", "certificate_without_tls.hcl:20:21", "Certificate without TLS", "https or ssl", 0},
		{"autoscale_min_above_max.hcl", "autoscale_min_above_max.hcl:13:11", "Invalid autoscale bounds", "min (5) must be at most max (3, set at", 0},
		{"autoscale_size_outside_bounds.hcl", "autoscale_size_outside_bounds.hcl:6:10", "Size outside autoscale bounds", "between min = 2 and max = 12", 0},
		{"autoscale_pets.hcl", "autoscale_pets.hcl:12:3", "Autoscale on pets", "Write size = N instead of logical_ids", 0},
		{"autoscale_missing_check.hcl", "autoscale_missing_check.hcl:12:3", "Missing check block", "at least one check block", 0},
		{"autoscale_zero_target.hcl", "autoscale_zero_target.hcl:18:29", "Invalid value", `"target_per_instance" must be a finite number greater than 0; got 0`, 0},
		{"autoscale_undeclared_source.hcl", "autoscale_undeclared_source.hcl:16:29", "Reference to undeclared provider", "Did you mean prometheus?", 0},
		{"autoscale_duplicate_check.hcl", "autoscale_duplicate_check.hcl:20:11", "Duplicate check", "autoscale_duplicate_check.hcl:15:5", 0},
		{"autoscale_bad_duration.hcl", "autoscale_bad_duration.hcl:15:27", "Invalid duration", `"10 seconds" is not one`, 0},
	}

	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.file] = true
		t.Run(strings.TrimSuffix(tt.file, ".hcl"), func(t *testing.T) {
			st, diags := config.Load("", filepath.Join(invalidDir, tt.file))
			errs := errorsOf(diags)
			want := max(tt.errors, 1)
			if len(errs) != want {
				t.Fatalf("got %d errors, want %d:\n%s", len(errs), want, render(st, diags))
			}
			d := errs[0]
			if d.Summary != tt.summary || !strings.Contains(d.Detail, tt.detail) {
				t.Errorf("error = %q: %q\nwant %q containing %q", d.Summary, d.Detail, tt.summary, tt.detail)
			}
			if got := pos(invalidDir, d.Subject); got != tt.pos {
				t.Errorf("error at %q, want %q", got, tt.pos)
			}
			// Whatever the error, the files are there to render it with the line shown.
			if tt.pos != "" && !strings.Contains(render(st, diags), "^") {
				t.Errorf("rendering has no underline:\n%s", render(st, diags))
			}
		})
	}

	// Every stack in testdata/invalid is checked here.
	entries, err := os.ReadDir(invalidDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !covered[e.Name()] {
			t.Errorf("testdata/invalid/%s has no test case", e.Name())
		}
	}
}

func errorsOf(diags hcl.Diagnostics) hcl.Diagnostics {
	var out hcl.Diagnostics
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			out = append(out, d)
		}
	}
	return out
}

func TestWriteDiagnostics(t *testing.T) {
	st, diags := config.Load("", filepath.Join(invalidDir, "undeclared_group.hcl"))
	var b strings.Builder
	if err := config.WriteDiagnostics(&b, st.Files, diags, false); err != nil {
		t.Fatal(err)
	}
	want := `Error: Reference to undeclared group

  on ../../testdata/invalid/undeclared_group.hcl:13:12, in enrollment "e":
  13:   source = group.catle
                 ^^^^^^^^^^^

No group named "catle" is declared. Did you mean group.cattle?

`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}

	// With color the severity is colored and the underline too.
	b.Reset()
	if err := config.WriteDiagnostics(&b, st.Files, diags, true); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "\x1b[31mError\x1b[0m: ") || !strings.Contains(b.String(), "\x1b[31m^^^^^^^^^^^\x1b[0m") {
		t.Errorf("colored:\n%q", b.String())
	}

	// Without the file, or without a subject, there is still a message.
	b.Reset()
	diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "No place", Detail: "Just a warning."})
	if err := config.WriteDiagnostics(&b, nil, diags, false); err != nil {
		t.Fatal(err)
	}
	want = `Error: Reference to undeclared group

  on ../../testdata/invalid/undeclared_group.hcl:13:12:
  (source code not available)

No group named "catle" is declared. Did you mean group.cattle?

Warning: No place

Just a warning.

`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestWriteDiagnosticsMultiLineAndTabs(t *testing.T) {
	src := "stack \"s\" {}\nprovider \"sim\" {}\ngroup \"g\" {\n\tsize = 1\n\tinstance {\n\t\tprovider = sim\n\t\ttype = \"vm\"\n\t\tproperties = [\n\t\t\t1,\n\t\t]\n\t}\n\tflavor { provider = sim }\n}\n"
	st, diags, _ := loadSource(t, map[string]string{"stack.hcl": src})
	if len(diags) != 1 {
		t.Fatalf("diags: %s", render(st, diags))
	}
	out := render(st, diags)
	// Both lines of the range are shown and underlined, tabs kept so the
	// carets line up.
	for _, want := range []string{
		"   8: \t\tproperties = [\n      \t\t             ^\n",
		"   9: \t\t\t1,\n      \t\t\t^^\n",
		"  10: \t\t]\n      \t\t^\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("rendering lacks %q:\n%s", want, out)
		}
	}
}
