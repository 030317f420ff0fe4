package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/peerlimit/peerlimit/httpfilter"
	"github.com/peerlimit/peerlimit/node"
	"github.com/peerlimit/peerlimit/rls"
)

// checkRequest is the body of POST /v1/check: one request of a service
// that is not written in Go, described by its tenant, endpoint (the
// request's path, escaped as on the wire) and method, and what it costs.
type checkRequest struct {
	Tenant   string `json:"tenant"`
	Endpoint string `json:"endpoint"`
	Method   string `json:"method"`
	Cost     int64  `json:"cost"` // 0 means 1
}

// checkResponse is its answer. The same headers are set on the HTTP
// response, whose status is 200 or 429.
type checkResponse struct {
	Allowed bool `json:"allowed"`
	// SLAs are the ids of the limits file's SLAs that matched: none means
	// no limit applies (allowed, nothing counted).
	SLAs              []string          `json:"slas"`
	Limit             int64             `json:"limit,omitempty"`
	Remaining         int64             `json:"remaining"`
	ResetSeconds      int64             `json:"reset_seconds,omitempty"`
	RetryAfterSeconds int64             `json:"retry_after_seconds,omitempty"`
	Headers           map[string]string `json:"headers,omitempty"`
}

// checker answers POST /v1/check from the middleware's limits file: the
// SLAs that match the endpoint and method, with their tiers (and the
// tenant's overrides), charged together on the node, so that a service
// calling it and a Go service using httpfilter on the same cluster count
// in the same series (keyed as the middleware keys them).
type checker struct {
	n      *node.Node
	limits *httpfilter.Reloader // nil: no -limits file
}

func (c *checker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if c.limits == nil {
		http.Error(w, "peerlimit: /v1/check needs a limits file (-limits or PEERLIMIT_LIMITS); envoy ratelimit's JSON is on /json", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCheckBytes))
	if err != nil {
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	var req checkRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		http.Error(w, "peerlimit: want {\"tenant\", \"endpoint\", \"method\", \"cost\"} in JSON: "+err.Error(), http.StatusBadRequest)
		return
	}
	if err := req.normalize(); err != nil {
		http.Error(w, "peerlimit: "+err.Error(), http.StatusBadRequest)
		return
	}
	resp := checkResponse{Allowed: true, SLAs: []string{}}
	var limits []counters.Limit
	for _, m := range c.limits.Limits().MatchHTTP(req.Method, req.Endpoint, nil) {
		s := m.SLA
		if !s.Enabled {
			continue
		}
		resp.SLAs = append(resp.SLAs, s.ID)
		for _, t := range s.TiersFor(req.Tenant) {
			limits = append(limits, counters.Limit{Tenant: req.Tenant, Endpoint: s.Endpoint, Method: s.KeyMethod,
				Period: t.Period, Threshold: t.Threshold, Algorithm: t.Algorithm, Weight: s.Cost})
		}
	}
	if len(limits) > 0 {
		d, err := c.n.Take(r.Context(), limits, req.Cost)
		if errors.Is(err, counters.ErrBadKey) || errors.Is(err, counters.ErrTooManyLimits) || errors.Is(err, counters.ErrBadCost) {
			http.Error(w, "peerlimit: "+err.Error(), http.StatusBadRequest)
			return
		}
		if err != nil {
			http.Error(w, "peerlimit: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		resp.Allowed, resp.Limit, resp.Remaining = d.Allowed, d.Limit, max(d.Remaining, 0)
		resp.ResetSeconds = ceilSeconds(d.Reset)
		if !d.Allowed && d.RetryAfter > 0 {
			resp.RetryAfterSeconds = ceilSeconds(d.RetryAfter)
		}
		resp.Headers = map[string]string{}
		for _, h := range rls.Headers(&d) {
			resp.Headers[h.GetKey()] = h.GetValue()
		}
	}
	out, err := json.Marshal(resp)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	if !resp.Allowed {
		w.WriteHeader(http.StatusTooManyRequests)
	}
	w.Write(append(out, '\n'))
}

// normalize checks the request and fills in its defaults: cost 0 is 1, the
// method in upper case.
func (q *checkRequest) normalize() error {
	switch {
	case q.Tenant == "":
		return errors.New("tenant: required")
	case !strings.HasPrefix(q.Endpoint, "/"):
		return fmt.Errorf("endpoint: want a path beginning with /, got %q", q.Endpoint)
	case q.Method == "":
		return errors.New("method: required")
	case q.Cost < 0 || q.Cost > node.MaxCount:
		return fmt.Errorf("cost: want 0 (meaning 1) to %d, got %d", node.MaxCount, q.Cost)
	}
	if q.Cost == 0 {
		q.Cost = 1
	}
	q.Method = strings.ToUpper(q.Method)
	return nil
}

func ceilSeconds(d time.Duration) int64 { return int64((d + time.Second - 1) / time.Second) }
