package config

import (
	"encoding/json"
	"math/big"
	"math/bits"
	"sort"
	"strconv"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// appendValueJSON appends the plain JSON of v, a wholly known, unmarked
// value whose type holds no DynamicPseudoType, exactly as go-cty's json
// package encodes it, but without its cost: go-cty spells every number
// with big.Float.Text, which for the 512-bit floats HCL makes takes
// microseconds, and enrollments render properties for every member on
// every sync (10,000 members: most of an idle watch's CPU). Integers
// within int64 take strconv; other numbers take go-cty's way.
func appendValueJSON(b []byte, v cty.Value) ([]byte, error) {
	if v.IsNull() {
		return append(b, "null"...), nil
	}
	ty := v.Type()
	switch {
	case ty == cty.String:
		s, err := json.Marshal(v.AsString())
		if err != nil {
			return nil, err
		}
		return append(b, s...), nil
	case ty == cty.Bool:
		return strconv.AppendBool(b, v.True()), nil
	case ty == cty.Number:
		return appendNumber(b, v), nil
	case ty.IsObjectType():
		names := make([]string, 0, len(ty.AttributeTypes()))
		for name := range ty.AttributeTypes() {
			names = append(names, name)
		}
		sort.Strings(names)
		b = append(b, '{')
		for i, name := range names {
			if i > 0 {
				b = append(b, ',')
			}
			k, err := json.Marshal(name)
			if err != nil {
				return nil, err
			}
			b = append(append(b, k...), ':')
			if b, err = appendValueJSON(b, v.GetAttr(name)); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case ty.IsMapType():
		b = append(b, '{')
		first := true
		for it := v.ElementIterator(); it.Next(); {
			k, ev := it.Element()
			if !first {
				b = append(b, ',')
			}
			first = false
			key, err := json.Marshal(k.AsString())
			if err != nil {
				return nil, err
			}
			b = append(append(b, key...), ':')
			if b, err = appendValueJSON(b, ev); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case ty.IsListType() || ty.IsSetType() || ty.IsTupleType():
		b = append(b, '[')
		first := true
		for it := v.ElementIterator(); it.Next(); {
			_, ev := it.Element()
			if !first {
				b = append(b, ',')
			}
			first = false
			var err error
			if b, err = appendValueJSON(b, ev); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	}
	out, err := ctyjson.Marshal(v, ty)
	if err != nil {
		return nil, err
	}
	return append(b, out...), nil
}

// appendNumber spells a number as go-cty does (big.Float.Text('f', -1),
// the shortest decimal that reads back at the float's precision): an
// integer within int64 by strconv, anything else as go-cty does. The
// integer must also fit the float's precision: beyond it the shortest
// decimal is not the integer's own digits (2^55 as a float64 reads
// 36028797018963970, not ...968).
func appendNumber(b []byte, v cty.Value) []byte {
	bf := v.AsBigFloat()
	if bf.IsInt() && (bf.Sign() != 0 || !bf.Signbit()) { // not -0, which go-cty spells "-0"
		if i, acc := bf.Int64(); acc == big.Exact && uint(bits.Len64(absInt64(i))) <= bf.Prec() {
			return strconv.AppendInt(b, i, 10)
		}
	}
	return append(b, bf.Text('f', -1)...)
}

// absInt64 is |i| as a uint64 (math.MinInt64 included).
func absInt64(i int64) uint64 {
	if i < 0 {
		return uint64(-(i + 1)) + 1
	}
	return uint64(i)
}

// fastJSON reports whether appendValueJSON encodes values of type ty
// itself (no dynamic or capsule types anywhere in it).
func fastJSON(ty cty.Type) bool {
	switch {
	case ty == cty.String || ty == cty.Bool || ty == cty.Number:
		return true
	case ty.IsObjectType():
		for _, at := range ty.AttributeTypes() {
			if !fastJSON(at) {
				return false
			}
		}
		return true
	case ty.IsMapType() || ty.IsListType() || ty.IsSetType():
		return fastJSON(ty.ElementType())
	case ty.IsTupleType():
		for _, et := range ty.TupleElementTypes() {
			if !fastJSON(et) {
				return false
			}
		}
		return true
	}
	return false
}
