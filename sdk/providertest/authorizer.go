package providertest

import (
	"slices"
	"testing"

	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/nfs"
)

func (s *suite) testAuthorizer(t *testing.T, typ string, c AuthorizerCase) {
	a := s.client.Authorizer(typ)
	if err := jsonObject(c.Valid); err != nil {
		t.Fatalf("Config.Authorizer[%q].Valid: %v", typ, err)
	}
	t.Run("Validate", func(t *testing.T) { s.testValidate(t, a.Validate, c.Valid, c.Invalid) })
	t.Run("Lifecycle", func(t *testing.T) { s.testAuthorizerLifecycle(t, a, c) })
	t.Run("RevokeUnknown", func(t *testing.T) {
		ctx, cancel := s.ctx(t)
		defer cancel()
		if err := a.Revoke(ctx, "providertest-unknown-"+randomID()); err != nil {
			t.Errorf("revoking an authorization that does not exist must not be an error (it is already gone): %v", err)
		}
	})
}

// testAuthorizerLifecycle authorizes a member as an enrollment does and
// checks Describe before and after the revoke.
func (s *suite) testAuthorizerLifecycle(t *testing.T, a nfs.Authorizer, c AuthorizerCase) {
	tags := s.tags()
	auth := nfs.Authorization{
		SourceID:   instance.ID("providertest-" + tags[TagCase]),
		Host:       "192.0.2.20",
		Volume:     "/providertest/" + tags[TagCase],
		Options:    []string{"rw", "sync"},
		Properties: c.Valid,
		Tags:       tags,
	}
	ctx, cancel := s.ctx(t)
	defer cancel()
	id, err := a.Authorize(ctx, auth)
	if err != nil {
		t.Fatalf("authorize %q: %v", auth.SourceID, err)
	}
	if id == "" {
		t.Fatalf("authorize %q returned an empty ID", auth.SourceID)
	}
	t.Cleanup(func() {
		ctx, cancel := s.cleanupCtx()
		defer cancel()
		if err := a.Revoke(ctx, id); err != nil {
			t.Errorf("cleanup: revoke %q: %v", id, err)
		}
	})

	got := s.authorizations(t, a, id)
	if len(got) != 1 {
		t.Fatalf("describe lists authorization %q %d times, want once", id, len(got))
	}
	if got[0].SourceID != auth.SourceID {
		t.Errorf("authorization %q source ID is %q, want %q", id, got[0].SourceID, auth.SourceID)
	}
	if eq, err := jsonEqual(got[0].Properties, auth.Properties); err != nil || !eq {
		t.Errorf("authorization %q properties are %s, want %s (%v); enrollments compare them to spot changes", id, got[0].Properties, auth.Properties, err)
	}

	if err := a.Revoke(ctx, id); err != nil {
		t.Fatalf("revoke %q: %v", id, err)
	}
	if got := s.authorizations(t, a, id); len(got) != 0 {
		t.Errorf("authorization %q still listed after revoke: %+v", id, got)
	}
	if err := a.Revoke(ctx, id); err != nil {
		t.Errorf("revoking authorization %q again must not be an error (it is already gone): %v", id, err)
	}
}

// authorizations returns the described authorizations with the given ID.
func (s *suite) authorizations(t *testing.T, a nfs.Authorizer, id string) []nfs.Authorization {
	t.Helper()
	ctx, cancel := s.ctx(t)
	defer cancel()
	all, err := a.Describe(ctx)
	if err != nil {
		t.Fatalf("describe: %v", err)
	}
	return slices.DeleteFunc(all, func(x nfs.Authorization) bool { return x.ID != id })
}
