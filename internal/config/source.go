package config

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
)

// ReadSource reads a stack file of at most MaxFileSize bytes: a larger one
// is refused without reading it all. The error is a diagnostic; src holds
// what was read (for the snippet of a diagnostic about it).
func ReadSource(name string) ([]byte, hcl.Diagnostics) {
	f, err := os.Open(name)
	if err != nil {
		return nil, readError(name, err)
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, readError(name, err)
	}
	return src, CheckSource(name, src)
}

func readError(name string, err error) hcl.Diagnostics {
	return hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Failed to read file",
		Detail:   fmt.Sprintf("The file %q could not be read: %s.", name, err),
	}}
}

// CheckSource applies the limits a stack file must meet before a parser
// sees it: at most MaxFileSize bytes, and brackets, braces, parentheses and
// template interpolations nested at most MaxNestingDepth deep. The parsers
// recurse once per level (a file nested 100,000 deep overflows the Go
// stack) and hold the whole file, so both are checked by a linear scan of
// the bytes first. name's extension says how strings and comments are
// written (HCL, JSON or YAML), so brackets inside them do not count.
func CheckSource(name string, src []byte) hcl.Diagnostics {
	if len(src) > MaxFileSize {
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "File too large",
			Detail: fmt.Sprintf("%s is larger than %d bytes (%s), the most a stack file may hold. "+
				"Split the stack into several files, or keep large data (scripts, certificates) outside it.",
				filepath.Base(name), MaxFileSize, byteSize(MaxFileSize)),
			Subject: &hcl.Range{Filename: name, Start: hcl.InitialPos, End: hcl.InitialPos},
		}}
	}
	off, ok := scanDepth(src, sourceSyntax(name), MaxNestingDepth)
	if ok {
		return nil
	}
	at := posAt(src, off)
	end := at
	end.Byte++
	end.Column++
	return hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Nesting too deep",
		Detail: fmt.Sprintf("Brackets, braces and parentheses nest more than %d deep here, the most a stack file may nest. "+
			"Flatten the value.", MaxNestingDepth),
		Subject: &hcl.Range{Filename: name, Start: at, End: end},
	}}
}

// byteSize is n in the largest binary unit that divides it ("4 MiB").
func byteSize(n int) string {
	switch {
	case n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// syntax is how a file writes strings and comments.
type syntax int

const (
	syntaxHCL syntax = iota
	syntaxJSON
	syntaxYAML
)

func sourceSyntax(name string) syntax {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".json":
		return syntaxJSON
	case ".yml", ".yaml":
		return syntaxYAML
	}
	return syntaxHCL
}

// scanDepth scans src for the nesting of (), [], {} and, inside HCL
// strings, ${...} and %{...}, skipping strings and comments. It returns the
// offset of the first opening that goes deeper than limit, and false; or
// true when none does. It does not judge the syntax: an unbalanced closing
// is forgiven (the parser reports it), heredocs are read as text.
func scanDepth(src []byte, syn syntax, limit int) (int, bool) {
	// stack holds what is open: a bracket, '$' for an interpolation
	// (closed by '}'), or '"' for a string (whose contents are text).
	var stack []byte
	depth := 0
	open := func(c byte) bool {
		stack = append(stack, c)
		depth++
		return depth <= limit
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		if n := len(stack); n > 0 && stack[n-1] == '"' {
			switch {
			case c == '\\':
				i++
			case c == '"':
				stack = stack[:n-1]
			case syn == syntaxHCL && (c == '$' || c == '%') && i+1 < len(src) && src[i+1] == c:
				i++ // $${ and %%{ are escapes, not interpolations
			case syn == syntaxHCL && (c == '$' || c == '%') && i+1 < len(src) && src[i+1] == '{':
				if !open('$') {
					return i, false
				}
				i++
			}
			continue
		}
		switch c {
		case '"':
			if syn != syntaxYAML || yamlQuoteOpens(src, i) {
				stack = append(stack, '"')
			}
		case '\'':
			if syn == syntaxYAML && yamlQuoteOpens(src, i) {
				i = skipSingleQuoted(src, i)
			}
		case '#':
			if syn != syntaxJSON {
				i = lineEnd(src, i)
			}
		case '/':
			if syn == syntaxHCL && i+1 < len(src) && src[i+1] == '/' {
				i = lineEnd(src, i)
			} else if syn == syntaxHCL && i+1 < len(src) && src[i+1] == '*' {
				if end := bytes.Index(src[i+2:], []byte("*/")); end >= 0 {
					i += end + 3
				} else {
					i = len(src)
				}
			}
		case '<':
			if syn == syntaxHCL {
				i = skipHeredoc(src, i)
			}
		case '(', '[', '{':
			if !open(c) {
				return i, false
			}
		case ')', ']', '}':
			if n := len(stack); n > 0 {
				stack = stack[:n-1]
				depth--
			}
		}
	}
	return 0, true
}

// lineEnd is the offset of the newline ending the line holding i (or the
// end of src).
func lineEnd(src []byte, i int) int {
	if j := bytes.IndexByte(src[i:], '\n'); j >= 0 {
		return i + j
	}
	return len(src)
}

// yamlQuoteOpens reports whether the quote at i starts a quoted YAML
// scalar, which it does only where a scalar starts (a quote inside a plain
// scalar, like don't, is text).
func yamlQuoteOpens(src []byte, i int) bool {
	for j := i - 1; j >= 0; j-- {
		switch src[j] {
		case ' ', '\t':
			continue
		case '\n', '\r', ':', '-', '[', '{', ',', '?':
			return true
		}
		return false
	}
	return true
}

// skipSingleQuoted returns the offset of the quote closing the YAML
// single-quoted string opening at i (two quotes stand for one inside it).
func skipSingleQuoted(src []byte, i int) int {
	for j := i + 1; j < len(src); j++ {
		if src[j] == '\'' {
			if j+1 < len(src) && src[j+1] == '\'' {
				j++
				continue
			}
			return j
		}
	}
	return len(src)
}

// skipHeredoc returns the offset of the last byte of the heredoc starting
// at i (<<EOF or <<-EOF, to the line holding only EOF), or i when there is
// none there.
func skipHeredoc(src []byte, i int) int {
	rest := src[i:]
	if !bytes.HasPrefix(rest, []byte("<<")) {
		return i
	}
	j := 2
	if j < len(rest) && rest[j] == '-' {
		j++
	}
	start := j
	for j < len(rest) && (rest[j] == '_' || rest[j] == '-' || isASCIILetterOrDigit(rest[j])) {
		j++
	}
	if j == start || j >= len(rest) || (rest[j] != '\n' && rest[j] != '\r') {
		return i
	}
	marker := rest[start:j]
	for pos := j; pos < len(rest); {
		nl := bytes.IndexByte(rest[pos:], '\n')
		if nl < 0 {
			return len(src)
		}
		lineStart := pos + nl + 1
		lineStop := lineStart + lineEnd(rest[lineStart:], 0)
		if bytes.Equal(bytes.TrimSpace(rest[lineStart:lineStop]), marker) {
			return i + lineStop - 1
		}
		pos = lineStart
	}
	return len(src)
}

func isASCIILetterOrDigit(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// posAt is the position of byte off of src: 1-based line, and column
// counted in characters as hcl counts them.
func posAt(src []byte, off int) hcl.Pos {
	lineStart := bytes.LastIndexByte(src[:off], '\n') + 1
	return hcl.Pos{
		Line:   bytes.Count(src[:off], []byte("\n")) + 1,
		Column: utf8.RuneCount(src[lineStart:off]) + 1,
		Byte:   off,
	}
}
