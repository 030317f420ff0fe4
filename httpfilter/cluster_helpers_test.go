package httpfilter

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/peerlimit/peerlimit/node"
)

// putProductServers puts the middleware with limits in front of a ServeMux
// serving PUT /v1/organizations/{orgId}/product/{id} on each node, and
// returns the test servers.
func putProductServers(t *testing.T, nodes []*node.Node, limits *Limits) []*httptest.Server {
	t.Helper()
	var servers []*httptest.Server
	for _, n := range nodes {
		f, err := New(n, limits)
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("PUT /v1/organizations/{orgId}/product/{id}", func(http.ResponseWriter, *http.Request) {})
		srv := httptest.NewServer(f.Middleware(mux))
		t.Cleanup(srv.Close)
		servers = append(servers, srv)
	}
	return servers
}
