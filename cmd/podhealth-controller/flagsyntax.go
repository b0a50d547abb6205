package main

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// The syntax of the flags' durations and of --namespace-selector, as the
// chart states it, pattern for pattern (a test holds them equal): the
// durations in values.schema.json, the selector in a template check, whose
// error says why, so that a value the chart takes is one the controller takes,
// and the reverse (TestTheSchemaAcceptsExactlyWhatTheFlagCheckAccepts).
var (
	// durationSyntax is a Go duration with each unit at most once, in the
	// order h, m, s, ms, us, ns, and as many digits as keep the sum within
	// Go's range (about 2,562,047 hours) and a nonzero fraction at least
	// 1 ns: a value a regular expression can check exactly, unlike the
	// edges of time.ParseDuration (a sum beyond range, a fraction that
	// rounds to zero).
	durationSyntax = regexp.MustCompile(`^([0-9]{1,6}(\.[0-9]{1,12})?h)?([0-9]{1,7}(\.[0-9]{1,10})?m)?([0-9]{1,9}(\.[0-9]{1,9})?s)?([0-9]{1,12}(\.[0-9]{1,6})?ms)?([0-9]{1,15}(\.[0-9]{1,3})?us)?([0-9]{1,18}(\.[0-9]+)?ns)?$`)
	// zeroDuration is a duration of durationSyntax that is zero: every
	// digit 0 but those of a fraction of a nanosecond, which is dropped.
	zeroDuration = regexp.MustCompile(`^(0+(\.0*)?(h|m|s|ms|us)|0+(\.[0-9]*)?ns)*$`)

	// selectorSyntax is a label selector of requirements joined by
	// commas: key, !key, key=value, key==value, key!=value, key in (v, ...)
	// and key notin (v, ...); a key's prefix has at most three DNS labels.
	selectorSyntax = regexp.MustCompile(`^` + selectorRequirement + `(,` + selectorRequirement + `)*$`)
	// selectorKeyword is a key or a value in a set that is "in" or
	// "notin", which the selector parser reads as its operators. The chart
	// refuses it in a template check, with this pattern.
	selectorKeyword = regexp.MustCompile(`(^|[,!(]|, )(in|notin)([,=!)]|$| )`)
)

const (
	selectorValue       = `[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?`
	selectorDNSLabel    = `[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?`
	selectorKey         = `(` + selectorDNSLabel + `(\.` + selectorDNSLabel + `){0,2}/)?` + selectorValue
	selectorRequirement = `(!` + selectorKey + `|` + selectorKey + `((=|==|!=)(` + selectorValue + `)?)?|` +
		selectorKey + ` (in|notin) \(` + selectorValue + `(, ?` + selectorValue + `)*\))`
)

// parseDuration parses s as durationSyntax states, refusing zero.
func parseDuration(s string) (time.Duration, error) {
	if strings.HasPrefix(s, "-") {
		return 0, fmt.Errorf("%q is negative: not positive", s)
	}
	if !durationSyntax.MatchString(s) {
		return 0, fmt.Errorf("%q is not a positive duration such as 1m30s: units h, m, s, ms, us, ns, each at most once and in that order, and at most 999999h", s)
	}
	if zeroDuration.MatchString(s) {
		return 0, fmt.Errorf("%q is zero: not positive", s)
	}
	return time.ParseDuration(s)
}

// durationFlag is a flag.Value of a positive duration of durationSyntax.
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil {
		return ""
	}
	return f.d.String()
}

func (f durationFlag) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	*f.d = d
	return nil
}

// checkSelectorSyntax refuses a --namespace-selector that selectorSyntax
// does not take.
func checkSelectorSyntax(s string) error {
	switch {
	case s == "":
		return errors.New("--namespace-selector is empty: it would select every namespace; give a label")
	case !selectorSyntax.MatchString(s) || selectorKeyword.MatchString(s):
		return fmt.Errorf("--namespace-selector: %q is not a selector such as team=a,env in (prod, stage): requirements key, !key, key=value, key!=value, key in (...), key notin (...), joined by commas", s)
	}
	return nil
}
