package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"net/url"
	"strings"
	"time"
)

func (s *site) funcs() template.FuncMap {
	return template.FuncMap{
		"ago":      s.ago,
		"age":      s.age,
		"when":     when,
		"seconds":  seconds,
		"compact":  compact,
		"plural":   plural,
		"pathpart": url.PathEscape,
		"kindText": kindText,
		"short":    short,
		"action": func(group, verb string, args ...string) action {
			a := action{Group: group, Verb: verb}
			if verb == "scale" && len(args) > 0 {
				a.Size = args[0]
			} else {
				a.IDs = args
			}
			return a
		},
		"timeOf": func(t *time.Time) time.Time {
			if t == nil {
				return time.Time{}
			}
			return *t
		},
	}
}

// ago is how long before now t was, for people ("5s ago"); "never" for a
// zero time.
func (s *site) ago(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := s.now().Sub(t)
	if d < 0 {
		d = 0
	}
	return span(d) + " ago"
}

// age is how long ago t was, without "ago"; "" for a zero time.
func (s *site) age(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return span(max(s.now().Sub(t), 0))
}

// span writes d to the second, in its two largest units ("3m 12s").
func span(d time.Duration) string {
	sec := int64(d / time.Second)
	switch {
	case sec < 60:
		return fmt.Sprintf("%ds", sec)
	case sec < 3600:
		return fmt.Sprintf("%dm %ds", sec/60, sec%60)
	case sec < 86400:
		return fmt.Sprintf("%dh %dm", sec/3600, sec%3600/60)
	}
	return fmt.Sprintf("%dd %dh", sec/86400, sec%86400/3600)
}

// when is t in RFC 3339, UTC, to the second: a datetime attribute, or a
// title.
func when(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// seconds writes a duration given in seconds for people.
func seconds(v float64) string {
	switch {
	case v <= 0:
		return "0 s"
	case v < 1:
		return fmt.Sprintf("%d ms", int(math.Round(v*1000)))
	case v < 100:
		return fmt.Sprintf("%.1f s", v)
	}
	return span(time.Duration(v * float64(time.Second)))
}

// compact is JSON on one line.
func compact(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

// plural is "1 instance", "3 instances".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// kindText is an event kind as a word or two.
func kindText(kind any) string {
	return strings.ReplaceAll(fmt.Sprint(kind), "-", " ")
}

// short is the first line of s, at most 200 characters.
func short(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if r := []rune(s); len(r) > 200 {
		return string(r[:200]) + "…"
	}
	return s
}
