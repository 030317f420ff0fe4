package demo

import (
	"context"
	"embed"
	"io"
	"net/http"
	"time"
)

//go:embed web/index.html
var webFS embed.FS

// Dashboard serves the web dashboard and the control API:
//
//	GET  /                       the page (polls /api/state every second)
//	GET  /api/state              the latest Snapshot as JSON
//	POST /api/kill?node=n2       SIGKILL a node
//	POST /api/restart?node=n2    start it again (same name and ports)
//	POST /api/partition?groups=n1,n2|n3   (or the spec as the body)
//	POST /api/heal
//
// Actions answer a FaultResult as JSON (400 with its error when it failed).
// Sup and Mon are required (the zero value is not usable); the handler is
// safe for concurrent use.
type Dashboard struct {
	Sup *Supervisor
	Mon *Monitor
	// Ref returns the time faults are measured from (the load's start).
	Ref func() time.Time
	// Ctx bounds the actions (restart waits for the node to serve).
	Ctx context.Context
}

// Handler returns the dashboard's HTTP handler.
func (d *Dashboard) Handler() http.Handler {
	mux := http.NewServeMux()
	page, _ := webFS.ReadFile("web/index.html")
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(page)
	})
	mux.HandleFunc("GET /api/state", func(w http.ResponseWriter, r *http.Request) {
		snap := d.Mon.Last()
		if snap == nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "starting"})
			return
		}
		writeJSON(w, http.StatusOK, snap)
	})
	action := func(name string, arg func(r *http.Request) string) {
		mux.HandleFunc("POST /api/"+name, func(w http.ResponseWriter, r *http.Request) {
			ref := time.Time{}
			if d.Ref != nil {
				ref = d.Ref()
			}
			res := Do(d.Ctx, d.Sup, d.Mon, ref, name, arg(r))
			code := http.StatusOK
			if res.Error != "" {
				code = http.StatusBadRequest
			}
			writeJSON(w, code, res)
		})
	}
	action(ActionKill, func(r *http.Request) string { return r.FormValue("node") })
	action(ActionRestart, func(r *http.Request) string { return r.FormValue("node") })
	action(ActionPartition, func(r *http.Request) string {
		if g := r.URL.Query().Get("groups"); g != "" {
			return g
		}
		b, _ := io.ReadAll(io.LimitReader(r.Body, 4096))
		return string(b)
	})
	action(ActionHeal, func(r *http.Request) string { return "" })
	return mux
}
