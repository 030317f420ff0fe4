package demo

import (
	"encoding/json"
	"fmt"
	"io"
)

// WriteReport writes r as indented JSON.
func WriteReport(w io.Writer, r Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("demo: write report: %w", err)
	}
	return nil
}
