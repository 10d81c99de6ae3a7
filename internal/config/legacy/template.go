package legacy

import (
	"fmt"
	"regexp"
	"strings"
)

// blankLeadingComments returns src with the template comments it starts
// with ({{/* ... */}}, also {{- /* ... */ -}}) replaced by spaces, newlines
// kept, so every line and column stays where it was. Old specifications
// were rendered as templates before parsing; a comment at the top was
// common and meant nothing to the specification. In YAML, # comment lines
// may come before and between them.
func blankLeadingComments(src []byte, yamlComments bool) []byte {
	out := append([]byte(nil), src...)
	i := 0
	for {
		for i < len(out) && (out[i] == ' ' || out[i] == '\t' || out[i] == '\n' || out[i] == '\r') {
			i++
		}
		if hasPrefixAt(out, i, "\ufeff") { // a byte order mark
			for k := i; k < i+len("\ufeff"); k++ {
				out[k] = ' '
			}
			continue
		}
		if yamlComments && i < len(out) && out[i] == '#' {
			for i < len(out) && out[i] != '\n' {
				i++
			}
			continue
		}
		open := ""
		for _, o := range []string{"{{/*", "{{- /*"} {
			if hasPrefixAt(out, i, o) {
				open = o
			}
		}
		if open == "" {
			return out
		}
		end := -1
		for _, c := range []string{"*/}}", "*/ -}}"} {
			if j := strings.Index(string(out[i+len(open):]), c); j >= 0 && (end < 0 || i+len(open)+j+len(c) < end) {
				end = i + len(open) + j + len(c)
			}
		}
		if end < 0 {
			return out // unterminated: let the parser report it
		}
		for k := i; k < end; k++ {
			if out[k] != '\n' && out[k] != '\r' {
				out[k] = ' '
			}
		}
		i = end
	}
}

func hasPrefixAt(b []byte, i int, prefix string) bool {
	return i <= len(b) && strings.HasPrefix(string(b[i:]), prefix)
}

// memberRef is a reference to an attribute of `member` (each source
// instance of an enrollment): "id", "logical_id", or a tag (tag set).
type memberRef struct {
	attr string
	tag  string
}

// templatePart is literal text or a member reference.
type templatePart struct {
	text string
	ref  *memberRef
}

// Template delimiters as old specifications wrote them. The whole file was
// rendered once as a template, so a {{.ID}} meant for the enrollment had to
// survive that pass: escaped as \{\{.ID\}\}, or produced by {{ "{{" }}.
var (
	escapedOpen  = regexp.MustCompile(`\{\{-?\s*("\{\{"|` + "`\\{\\{`" + `)\s*-?\}\}|\\\{\\\{`)
	escapedClose = regexp.MustCompile(`\{\{-?\s*("\}\}"|` + "`\\}\\}`" + `)\s*-?\}\}|\\\}\\\}`)
	action       = regexp.MustCompile(`\{\{(.*?)\}\}`)
	tagField     = regexp.MustCompile(`^\.Tags\.([A-Za-z_][A-Za-z0-9_]*)$`)
	tagIndex     = regexp.MustCompile(`^index\s+\.Tags\s+"((?:[^"\\]|\\.)*)"$`)
)

// supportedActions is what the error about any other action lists.
const supportedActions = `{{.ID}} (member.id), {{.LogicalID}} (member.logical_id), {{.Tags.NAME}} and {{index .Tags "NAME"}} (member.tags["NAME"]), written plainly or escaped as \{\{.ID\}\} or {{ "{{" }}.ID}}`

// memberTemplate splits an enrollment property string into literal text and
// member references. ok is false when the string holds no reference; err
// names an action it cannot translate.
func memberTemplate(s string) (parts []templatePart, ok bool, err error) {
	unescaped := escapedClose.ReplaceAllString(escapedOpen.ReplaceAllString(s, "{{"), "}}")
	locs := action.FindAllStringSubmatchIndex(unescaped, -1)
	if len(locs) == 0 {
		return nil, false, nil
	}
	last := 0
	for _, loc := range locs {
		if loc[0] > last {
			parts = append(parts, templatePart{text: unescaped[last:loc[0]]})
		}
		ref, err := memberAction(unescaped[loc[2]:loc[3]])
		if err != nil {
			return nil, false, err
		}
		parts = append(parts, templatePart{ref: ref})
		last = loc[1]
	}
	if last < len(unescaped) {
		parts = append(parts, templatePart{text: unescaped[last:]})
	}
	return parts, true, nil
}

// memberAction translates the inside of one {{ ... }}.
func memberAction(inner string) (*memberRef, error) {
	body := strings.TrimSpace(inner)
	body = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(body, "-"), "-"))
	switch body {
	case ".ID":
		return &memberRef{attr: "id"}, nil
	case ".LogicalID":
		return &memberRef{attr: "logical_id"}, nil
	}
	if m := tagField.FindStringSubmatch(body); m != nil {
		return &memberRef{attr: "tags", tag: m[1]}, nil
	}
	if m := tagIndex.FindStringSubmatch(body); m != nil {
		return &memberRef{attr: "tags", tag: strings.ReplaceAll(strings.ReplaceAll(m[1], `\"`, `"`), `\\`, `\`)}, nil
	}
	return nil, fmt.Errorf("{{%s}} cannot be translated; the supported forms are %s", inner, supportedActions)
}
