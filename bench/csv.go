package main

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
)

// writeCSV writes a header and rows to path, creating its folder.
func writeCSV(path string, header []string, rows [][]string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	w := csv.NewWriter(f)
	_ = w.Write(header)
	_ = w.WriteAll(rows) // WriteAll flushes
	if err := w.Error(); err != nil {
		_ = f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// writeRunsCSV writes one row per throughput run.
func writeRunsCSV(path string, runs []Run) error {
	rows := make([][]string, 0, len(runs))
	for _, r := range runs {
		rows = append(rows, []string{r.Runner, fmt.Sprint(r.Rep), ff(r.Seconds), ff(r.MsgsPerSec), ff(r.CPUSeconds),
			ff(r.CPUPer1000), ff(r.ServerCPU), ff(r.ServerCPUShare), fmt.Sprint(r.Delivered)})
	}
	return writeCSV(path, []string{"runner", "rep", "seconds", "msgs_per_sec", "cpu_seconds", "cpu_per_1000",
		"server_cpu_seconds", "server_cpu_share", "delivered"}, rows)
}
