package providertest

import "errors"

// watchUnsupported reports whether err says the provider does not serve
// Watch: sdk/plugin turns the provider's UNIMPLEMENTED answer into
// errors.ErrUnsupported.
func watchUnsupported(err error) bool {
	return errors.Is(err, errors.ErrUnsupported)
}
