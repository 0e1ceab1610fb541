// Package secrets keeps Codexgate's secrets in the OS keyring (the Secret
// Service on Linux) under the service "codexgate": never in a file, a log or
// a command line. There is no plaintext fallback: without a keyring every
// call fails with ErrNoKeyring, which says what is missing.
package secrets

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"codexgate/sessionbus"

	"github.com/zalando/go-keyring"
)

// Service is the keyring service every secret is stored under.
const Service = "codexgate"

// indexName holds the list of names, since the keyring cannot list them;
// '#' is not allowed in a name, so no secret can take its place.
const indexName = "#names"

// timeout bounds a keyring call: an unlock prompt can wait forever.
const timeout = 10 * time.Second

// ErrNoKeyring is the error of every call when no keyring answers.
var ErrNoKeyring = errors.New("no OS keyring: no Secret Service (org.freedesktop.secrets, such as gnome-keyring-daemon) answers on the session bus, or it is locked; start and unlock one (log in to a desktop session, or run `gnome-keyring-daemon --unlock`), then try again")

// ErrNotFound is returned for a name that holds no secret.
var ErrNotFound = errors.New("no such secret")

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ValidName checks a secret's name.
func ValidName(name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("secret name %q: use letters, digits, '.', '_' and '-' (at most 64)", name)
	}
	return nil
}

// call runs f with the timeout, and turns keyring failures into ErrNoKeyring.
func call[T any](f func() (T, error)) (T, error) {
	if sessionbus.Address() == "" {
		var zero T
		return zero, fmt.Errorf("%w (%v)", ErrNoKeyring, sessionbus.ErrNoBus)
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		switch {
		case r.err == nil:
			return r.v, nil
		case errors.Is(r.err, keyring.ErrNotFound):
			return r.v, ErrNotFound
		}
		return r.v, fmt.Errorf("%w (%v)", ErrNoKeyring, r.err)
	case <-time.After(timeout):
		var zero T
		return zero, fmt.Errorf("%w (no answer in %v)", ErrNoKeyring, timeout)
	}
}

// Get returns the secret called name.
func Get(name string) (string, error) {
	if err := ValidName(name); err != nil {
		return "", err
	}
	return call(func() (string, error) { return keyring.Get(Service, name) })
}

// Set stores value as the secret called name.
func Set(name, value string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if value == "" {
		return errors.New("the secret is empty")
	}
	if _, err := call(func() (struct{}, error) { return struct{}{}, keyring.Set(Service, name, value) }); err != nil {
		return err
	}
	return updateIndex(func(names []string) []string {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
		return names
	})
}

// Delete removes the secret called name.
func Delete(name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if _, err := call(func() (struct{}, error) { return struct{}{}, keyring.Delete(Service, name) }); err != nil {
		return err
	}
	return updateIndex(func(names []string) []string {
		return slices.DeleteFunc(names, func(n string) bool { return n == name })
	})
}

// List returns the names of the stored secrets, never their values.
func List() ([]string, error) {
	raw, err := call(func() (string, error) { return keyring.Get(Service, indexName) })
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return strings.Fields(raw), nil
}

func updateIndex(f func([]string) []string) error {
	names, err := List()
	if err != nil {
		return err
	}
	names = f(names)
	slices.Sort(names)
	if len(names) == 0 {
		_, err := call(func() (struct{}, error) { return struct{}{}, keyring.Delete(Service, indexName) })
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	}
	_, err = call(func() (struct{}, error) { return struct{}{}, keyring.Set(Service, indexName, strings.Join(names, " ")) })
	return err
}
