package ui_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/pgtest"
)

// The Endpoints view is served with the page, under the same policy, and
// every element its script drives is on the page: a renamed id would leave
// a button that does nothing. Its DOM is built with textContent only (an
// endpoint's URL, description and a receiver's answer are not markup).
func TestEndpointsViewIsServedWholeAndBuildsNoMarkup(t *testing.T) {
	t.Parallel()
	url := serve(t, pgtest.New(t))
	fetch := func(path string) (string, http.Header) {
		resp, err := http.Get(url + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b), resp.Header
	}
	page, _ := fetch("/")
	script, h := fetch("/ui/endpoints.js")
	require.Contains(t, h.Get("Content-Type"), "javascript")
	require.Contains(t, page, `<script src="/ui/endpoints.js" defer></script>`)
	require.Contains(t, page, `id="view-endpoints"`)

	ids := regexp.MustCompile(`\$\('([a-z0-9-]+)'\)`).FindAllStringSubmatch(script, -1)
	require.Greater(t, len(ids), 20, "the script drives the view by id")
	for _, m := range ids {
		require.Contains(t, page, `id="`+m[1]+`"`, "endpoints.js uses #%s", m[1])
	}
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("} {
		require.NotContains(t, script, bad)
	}
	// Every write the view makes is an API route operators have.
	for _, route := range []string{"'disable'", "'enable'", "'rotate-secret'", "'recover'", "/v1/outbound/deliveries/", "'deliveries'", "'attempts'"} {
		require.Contains(t, script, route)
	}
	// The other views give way to it, and it to them.
	payouts, _ := fetch("/ui/payouts.js")
	require.Contains(t, payouts, "'view-endpoints'")
	require.True(t, strings.Contains(script, "'view-payouts'"))
}
