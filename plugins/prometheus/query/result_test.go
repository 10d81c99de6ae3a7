package query

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"pgregory.net/rapid"
)

func TestRead(t *testing.T) {
	at := time.Unix(1700000000, 0)
	ts := model.TimeFromUnixNano(time.Unix(1700000005, 0).UnixNano())
	series := func(name string, v float64) *model.Sample {
		return &model.Sample{Metric: model.Metric{"__name__": "x", "name": model.LabelValue(name)}, Value: model.SampleValue(v), Timestamp: ts}
	}
	for _, c := range []struct {
		name    string
		v       model.Value
		value   float64
		empty   bool
		warn    string // in the one warning, when set
		errWith string // in the error, when set
	}{
		{name: "scalar", v: &model.Scalar{Value: 3, Timestamp: ts}, value: 3},
		{name: "one sample", v: model.Vector{series("a", 2.5)}, value: 2.5},
		{name: "negative", v: model.Vector{series("a", -1)}, value: -1},
		{name: "zero is a value", v: model.Vector{series("a", 0)}, value: 0},
		{name: "empty vector", v: model.Vector{}, empty: true},
		{name: "NaN scalar", v: &model.Scalar{Value: model.SampleValue(math.NaN()), Timestamp: ts}, empty: true, warn: "NaN"},
		{name: "NaN sample", v: model.Vector{series("a", math.NaN())}, empty: true, warn: "NaN"},
		{name: "+Inf", v: model.Vector{series("a", math.Inf(1))}, empty: true, warn: "+Inf"},
		{name: "-Inf", v: &model.Scalar{Value: model.SampleValue(math.Inf(-1)), Timestamp: ts}, empty: true, warn: "-Inf"},
		{name: "two series", v: model.Vector{series("a", 1), series("b", 2)}, errWith: `matched 2 series (x{name="a"}, x{name="b"}), but a check needs one number: aggregate them, with sum(...)`},
		{name: "many series", v: model.Vector{series("a", 1), series("b", 2), series("c", 3), series("d", 4), series("e", 5)}, errWith: "matched 5 series (" + `x{name="a"}, x{name="b"}, x{name="c"}, and 2 more)`},
		{name: "histogram", v: model.Vector{{Metric: model.Metric{"__name__": "h"}, Histogram: &model.SampleHistogram{Count: 1}}}, errWith: "native histogram"},
		{name: "matrix", v: model.Matrix{{Metric: model.Metric{"__name__": "x"}}}, errWith: "range vector"},
		{name: "string", v: &model.String{Value: "hello"}, errWith: `string ("hello")`},
		{name: "nothing", v: nil, errWith: "no result"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Read(c.v, at)
			if c.errWith != "" {
				if err == nil || !strings.Contains(err.Error(), c.errWith) {
					t.Fatalf("error %v, want one with %q", err, c.errWith)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Empty != c.empty || (!c.empty && s.Value != c.value) {
				t.Fatalf("got %+v, want value %v empty %v", s, c.value, c.empty)
			}
			if s.Empty && s.Value != 0 {
				t.Errorf("an empty sample has value %v, want 0", s.Value)
			}
			switch {
			case c.warn == "" && len(s.Warnings) > 0:
				t.Errorf("unexpected warnings %q", s.Warnings)
			case c.warn != "" && (len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], c.warn)):
				t.Errorf("warnings %q, want one with %q", s.Warnings, c.warn)
			}
			want := ts.Time()
			if _, ok := c.v.(model.Vector); ok && c.empty && len(c.v.(model.Vector)) == 0 {
				want = at
			}
			if !s.At.Equal(want) {
				t.Errorf("at %v, want %v", s.At, want)
			}
		})
	}
}

// TestReadOneNumber: a result of one finite number is that number; any
// other one sample is no data; several series are always an error.
func TestReadOneNumber(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		f := rapid.Float64().Draw(t, "value")
		n := rapid.IntRange(0, 5).Draw(t, "series")
		vec := model.Vector{}
		for i := range n {
			vec = append(vec, &model.Sample{Metric: model.Metric{"i": model.LabelValue(rune('a' + i))}, Value: model.SampleValue(f)})
		}
		s, err := Read(vec, time.Unix(0, 0))
		switch {
		case n > 1:
			if err == nil {
				t.Fatalf("%d series read as %+v", n, s)
			}
		case err != nil:
			t.Fatal(err)
		case n == 0 || math.IsNaN(f) || math.IsInf(f, 0):
			if !s.Empty || s.Value != 0 {
				t.Fatalf("got %+v, want no data", s)
			}
		case s.Empty || s.Value != f:
			t.Fatalf("got %+v, want %v", s, f)
		}
	})
}
