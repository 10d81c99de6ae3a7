package command

import (
	"io"
	"os"
	"strings"
	"testing"
)

func TestColorAllowed(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want bool
	}{
		{env: map[string]string{"TERM": "xterm-256color"}, want: true},
		{env: map[string]string{}, want: true},
		{env: map[string]string{"TERM": "dumb"}, want: false},
		{env: map[string]string{"TERM": "xterm", "NO_COLOR": "1"}, want: false},
		{env: map[string]string{"NO_COLOR": "false"}, want: false}, // any value, as no-color.org says
	}
	for _, tt := range tests {
		if got := colorAllowed(func(k string) string { return tt.env[k] }); got != tt.want {
			t.Errorf("colorAllowed(%v) = %v, want %v", tt.env, got, tt.want)
		}
	}
}

func TestNoColorOffATerminal(t *testing.T) {
	// A buffer is no terminal: no colors even when everything else allows them.
	m, _, _ := newTestMeta(t)
	t.Setenv("NO_COLOR", "")
	t.Setenv("TERM", "xterm")
	if m.color(false) {
		t.Error("color() is true for a writer that is not a terminal")
	}
}

func TestApprovalWithoutTerminalNamesTheVerb(t *testing.T) {
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	for _, verb := range []string{"apply", "destroy"} {
		m := NewMeta(t.TempDir(), devnull, io.Discard, io.Discard)
		err := m.approve(verb, "Really?", "detail")
		if err == nil || !strings.Contains(err.Error(), "run with -auto-approve to "+verb+" without asking") {
			t.Errorf("approve(%q) without a terminal: %v", verb, err)
		}
	}
}
