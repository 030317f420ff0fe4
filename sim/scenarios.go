package sim

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

//go:embed testdata/*.txt
var scenarioFiles embed.FS

// Scenarios returns every built-in scenario (sim/testdata/*.txt), sorted by
// name.
func Scenarios() ([]*Scenario, error) {
	names, err := fs.Glob(scenarioFiles, "testdata/*.txt")
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	out := make([]*Scenario, 0, len(names))
	for _, n := range names { // Glob sorts
		sc, err := loadEmbedded(n)
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	return out, nil
}

// LoadScenario returns the built-in scenario called name.
func LoadScenario(name string) (*Scenario, error) {
	if strings.ContainsAny(name, "/\\") {
		return nil, fmt.Errorf("sim: bad scenario name %q", name)
	}
	return loadEmbedded("testdata/" + name + ".txt")
}

func loadEmbedded(file string) (*Scenario, error) {
	src, err := scenarioFiles.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("sim: unknown scenario %q: %w", strings.TrimSuffix(path.Base(file), ".txt"), err)
	}
	return ParseScenario(strings.TrimSuffix(path.Base(file), ".txt"), src)
}
