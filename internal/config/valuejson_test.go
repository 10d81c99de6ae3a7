package config

import (
	"math/big"
	"testing"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
	"pgregory.net/rapid"
)

// valueGen draws cty values of the shapes properties take: objects, maps,
// lists, sets and tuples of strings, bools and numbers (integers, big
// ones, fractions, -0), nulls among them.
func valueGen(depth int) *rapid.Generator[cty.Value] {
	return rapid.Custom(func(t *rapid.T) cty.Value {
		kind := rapid.IntRange(0, 8).Draw(t, "kind")
		if depth <= 0 {
			kind %= 4
		}
		switch kind {
		case 0:
			return cty.StringVal(rapid.String().Draw(t, "s"))
		case 1:
			return cty.BoolVal(rapid.Bool().Draw(t, "b"))
		case 2:
			return numberGen().Draw(t, "n")
		case 3:
			return cty.NullVal(rapid.SampledFrom([]cty.Type{cty.String, cty.Number, cty.Bool}).Draw(t, "nt"))
		case 4:
			attrs := rapid.MapOfN(rapid.StringMatching(`[a-z<>&"]{1,6}`), valueGen(depth-1), 0, 4).Draw(t, "attrs")
			return cty.ObjectVal(attrs)
		case 5:
			elems := rapid.MapOfN(rapid.StringMatching(`[a-z]{1,4}`), numberGen(), 1, 4).Draw(t, "map")
			return cty.MapVal(elems)
		case 6:
			return cty.ListVal(rapid.SliceOfN(rapid.Custom(func(t *rapid.T) cty.Value {
				return cty.StringVal(rapid.String().Draw(t, "e"))
			}), 1, 4).Draw(t, "list"))
		case 7:
			return cty.SetVal(rapid.SliceOfN(numberGen(), 1, 4).Draw(t, "set"))
		default:
			return cty.TupleVal(rapid.SliceOfN(valueGen(depth-1), 0, 4).Draw(t, "tuple"))
		}
	})
}

func numberGen() *rapid.Generator[cty.Value] {
	return rapid.Custom(func(t *rapid.T) cty.Value {
		switch rapid.IntRange(0, 4).Draw(t, "nkind") {
		case 0:
			return cty.NumberIntVal(rapid.Int64().Draw(t, "i"))
		case 1:
			return cty.NumberFloatVal(rapid.Float64().Draw(t, "f"))
		case 2:
			v, err := cty.ParseNumberVal(rapid.StringMatching(`-?[0-9]{1,30}(\.[0-9]{1,20})?`).Draw(t, "lit"))
			if err != nil {
				t.Fatal(err)
			}
			return v
		case 3:
			return cty.NumberVal(new(big.Float).Neg(new(big.Float))) // -0
		default:
			f, _ := new(big.Float).SetPrec(512).SetString("123456789012345678901234567890")
			return cty.NumberVal(f)
		}
	})
}

// valueJSON writes what go-cty's json.Marshal writes, byte for byte.
func TestValueJSONMatchesGoCty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := valueGen(3).Draw(t, "v")
		want, err := ctyjson.Marshal(v, v.Type())
		if err != nil {
			t.Skip(err)
		}
		got, err := valueJSON(v)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("valueJSON = %s\ngo-cty     = %s", got, want)
		}
	})
}

func BenchmarkValueJSON(b *testing.B) {
	v := cty.ObjectVal(map[string]cty.Value{"host": cty.StringVal("i-123"), "iops": cty.MustParseNumberVal("10")})
	for b.Loop() {
		if _, err := valueJSON(v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValueJSONGoCty(b *testing.B) {
	v := cty.ObjectVal(map[string]cty.Value{"host": cty.StringVal("i-123"), "iops": cty.MustParseNumberVal("10")})
	for b.Loop() {
		if _, err := ctyjson.Marshal(v, v.Type()); err != nil {
			b.Fatal(err)
		}
	}
}

// Integers beyond a float's precision: go-cty spells the shortest decimal
// that reads back at that precision, not the integer's digits (rapid found
// 2^55 as a float64).
func TestValueJSONIntegersBeyondPrecision(t *testing.T) {
	for _, v := range []cty.Value{
		cty.NumberFloatVal(1 << 55), cty.NumberFloatVal(-(1 << 55)), cty.NumberFloatVal(1 << 53),
		cty.NumberFloatVal(1<<53 - 1), cty.NumberIntVal(1 << 62), cty.NumberIntVal(-1 << 63),
	} {
		got, err := valueJSON(v)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ctyjson.Marshal(v, v.Type())
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("valueJSON(%v) = %s, go-cty %s", v.AsBigFloat(), got, want)
		}
	}
}
