package main

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
)

// TestTheFlagSyntaxIsTheChartSchemas: the patterns the flag check applies
// are those of the chart's values.schema.json, and the keyword check is its
// template's.
func TestTheFlagSyntaxIsTheChartSchemas(t *testing.T) {
	chart := filepath.Join("..", "..", "charts", "podhealth-controller")
	data, err := os.ReadFile(filepath.Join(chart, "values.schema.json"))
	require.NoError(t, err)
	var schema struct {
		Properties struct {
			NamespaceSelector struct {
				Pattern string `json:"pattern"`
			} `json:"namespaceSelector"`
		} `json:"properties"`
		Definitions struct {
			Duration struct {
				Pattern string `json:"pattern"`
				Not     struct {
					Pattern string `json:"pattern"`
				} `json:"not"`
			} `json:"duration"`
		} `json:"definitions"`
	}
	require.NoError(t, json.Unmarshal(data, &schema))
	require.Equal(t, durationSyntax.String(), schema.Definitions.Duration.Pattern)
	require.Equal(t, zeroDuration.String(), schema.Definitions.Duration.Not.Pattern)
	require.Empty(t, schema.Properties.NamespaceSelector.Pattern, "the template checks the selector, with an error that says why")
	deployment, err := os.ReadFile(filepath.Join(chart, "templates", "deployment.yaml"))
	require.NoError(t, err)
	// In the template's Go string literal: backslashes and quotes escaped.
	quoted := func(re *regexp.Regexp) string { return strconv.Quote(re.String()) }
	require.Contains(t, string(deployment), `regexMatch `+quoted(selectorSyntax)+` .`)
	require.Contains(t, string(deployment), `regexMatch `+quoted(selectorKeyword)+` .`)
}

// randomDuration is a duration of durationSyntax with random parts, up to
// every part at its most digits.
func randomDuration(r *rand.Rand) string {
	units := []struct {
		unit            string
		digits, decimal int // at most; decimal -1: any number
	}{{"h", 6, 12}, {"m", 7, 10}, {"s", 9, 9}, {"ms", 12, 6}, {"us", 15, 3}, {"ns", 18, 20}}
	digits := func(n int, nines bool) string {
		var b strings.Builder
		for range n {
			if nines {
				b.WriteByte('9')
			} else {
				b.WriteByte(byte('0' + r.IntN(10)))
			}
		}
		return b.String()
	}
	var b strings.Builder
	nines := r.IntN(4) == 0 // the largest values, at the edge of Go's range
	for _, u := range units {
		if !nines && r.IntN(2) == 0 {
			continue
		}
		n := u.digits
		if !nines {
			n = 1 + r.IntN(u.digits)
		}
		b.WriteString(digits(n, nines))
		if nines || r.IntN(3) == 0 {
			b.WriteString("." + digits(1+r.IntN(u.decimal), nines))
		}
		b.WriteString(u.unit)
	}
	return b.String()
}

// TestADurationOfTheSyntaxIsOneGoTakesAndOnlyZeroIsRefused: every string
// the syntax takes parses with time.ParseDuration, within its range, and is
// zero exactly when zeroDuration says so; so the chart's schema, which
// checks only the syntax, refuses nothing more or less than the flag check.
func TestADurationOfTheSyntaxIsOneGoTakesAndOnlyZeroIsRefused(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	edges := []string{
		"999999.999999999999h9999999.9999999999m999999999.999999999s999999999999.999999ms999999999999999.999us999999999999999999.99999ns",
		"0.000000000001h", "0.0000000001m", "0.000000001s", "0.000001ms", "0.001us", "1ns", "0.9ns", "0h0m0s0ms0us0.999ns", "1.5ns",
	}
	for i := 0; i < 20000; i++ {
		s := randomDuration(r)
		if i < len(edges) {
			s = edges[i]
		}
		if s == "" {
			continue
		}
		require.True(t, durationSyntax.MatchString(s), s)
		d, err := time.ParseDuration(s)
		require.NoError(t, err, s)
		require.Equal(t, d == 0, zeroDuration.MatchString(s), "%s is %s", s, d)
		got, err := parseDuration(s)
		if d == 0 {
			require.Error(t, err, s)
		} else {
			require.NoError(t, err, s)
			require.Equal(t, d, got)
		}
	}
	for _, refused := range []string{"", "0", "1m1h", "1h1h", "2562047h", "9999999999h", "1d", "µs", "1µs", "-1s", "+1s", ".5s", "5.s", " 1s", "1s ", "0.0000000001s", "1.0000000000001h"} {
		_, err := parseDuration(refused)
		require.Error(t, err, refused)
	}
}

func TestASelectorOfTheSyntaxIsOneTheParserTakes(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	long := strings.Repeat("a", 61)
	names := []string{"team", "a", "A9", "x_y.z-w", "z" + long + "z", "app.kubernetes.io/name", "example.com/team", "a" + long + "a.b" + long + "b.c" + long + "c/d" + long + "d"}
	values := []string{"a", "prod", "Z_z.9-x", "v" + long + "v", "1"}
	requirement := func() string {
		key := names[r.IntN(len(names))]
		switch r.IntN(7) {
		case 0:
			return key
		case 1:
			return "!" + key
		case 2:
			return key + "=" + values[r.IntN(len(values))]
		case 3:
			return key + "==" + values[r.IntN(len(values))]
		case 4:
			return key + "!=" + []string{"", "a"}[r.IntN(2)]
		default:
			set := []string{}
			for range 1 + r.IntN(3) {
				set = append(set, values[r.IntN(len(values))])
			}
			return key + []string{" in (", " notin ("}[r.IntN(2)] + strings.Join(set, []string{",", ", "}[r.IntN(2)]) + ")"
		}
	}
	for range 5000 {
		var reqs []string
		for range 1 + r.IntN(4) {
			reqs = append(reqs, requirement())
		}
		s := strings.Join(reqs, ",")
		require.NoError(t, checkSelectorSyntax(s), s)
		selector, err := labels.Parse(s)
		require.NoError(t, err, s)
		require.False(t, selector.Empty(), s)
	}
	for _, refused := range []string{"", "team=a,", "Has Space=x", "a=(b)", "a in (", "in", "in=a", "!notin", "a in (in)", "a in (x, in)", "a.b.c.d/e=f", "a=b c", ",a", "a in ()", "A/b=c", strings.Repeat("n", 64) + "=a"} {
		require.Error(t, checkSelectorSyntax(refused), refused)
	}
}
