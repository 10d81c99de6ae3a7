package config

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameLength bounds every name: of the stack, and the labels of
// provider, group, loadbalancer, ingress and enrollment blocks.
const MaxNameLength = 255

// nameRule says what a name must look like, for messages.
const nameRule = "a name must start with a letter or underscore and contain only letters, digits, underscores and dashes"

// CheckStackName is the rule for the stack's name. It is put on every
// instance (the infrakit.stack tag) and names the state's keys in etcd, so
// it obeys the rule of the names a reference can write (no dots, slashes,
// spaces or control characters, which would escape a key prefix or a
// directory) and their length.
func CheckStackName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("the stack name must not be empty")
	case len(name) > MaxNameLength:
		return fmt.Errorf("the stack name is %d bytes long; %s", len(name), lengthRule())
	case !validIdentifier(name):
		return fmt.Errorf("%s is not a valid stack name: %s", quoteName(name), nameRule)
	}
	return nil
}

// checkReferenceableName is the rule for the label of a block that a
// reference names (provider, group, loadbalancer).
func checkReferenceableName(kind, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("the name of a %s must not be empty", kind)
	case len(name) > MaxNameLength:
		return fmt.Errorf("the name of a %s is %d bytes long; %s", kind, len(name), lengthRule())
	case !validIdentifier(name):
		return fmt.Errorf("%s cannot be referenced: %s", quoteName(name), nameRule)
	}
	return nil
}

// checkLabel is the rule for the label of a block no reference names
// (ingress "test.com", enrollment): any text, not empty, not too long,
// valid UTF-8 without control characters.
func checkLabel(kind, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("the name of a %s must not be empty", kind)
	case len(name) > MaxNameLength:
		return fmt.Errorf("the name of a %s is %d bytes long; %s", kind, len(name), lengthRule())
	case !utf8.ValidString(name) || strings.ContainsFunc(name, isControl):
		return fmt.Errorf("the name of a %s must be text without control characters; got %s", kind, quoteName(name))
	}
	return nil
}

func lengthRule() string { return fmt.Sprintf("a name is at most %d bytes", MaxNameLength) }

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// quoteName quotes a name for a message, shortened when it is long.
func quoteName(name string) string {
	return fmt.Sprintf("%q", clip(name, 64))
}

// clip is s cut to at most n bytes (at a rune boundary) with "…" after
// it when something was cut: how messages show a value that may be huge.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// impliedName turns a directory's name into a stack name that obeys
// CheckStackName, as Docker Compose makes a project name of one: each
// character a name may not hold becomes a dash, a name that cannot start
// as it does gets an underscore in front, and a long one is cut.
func impliedName(dir string) string {
	var b strings.Builder
	for _, r := range dir {
		switch {
		case r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	name := b.String()
	if name != "" && !validIdentifier(name) {
		name = "_" + name
	}
	name = strings.TrimSuffix(clip(name, MaxNameLength-len("…")), "…")
	if CheckStackName(name) != nil {
		return ""
	}
	return name
}
