.PHONY: run setup test bench

# Set up (.venv, requirements, demo data) and start the app on http://localhost:$(PORT) (default 8501),
# reachable from this machine only; ADDRESS=0.0.0.0 (or an interface's address) serves the network,
# e.g. behind a team's HTTPS proxy (README, "Teams")
PORT ?= 8501
ADDRESS ?= 127.0.0.1

run: setup
	.venv/bin/python -m streamlit run app.py --server.port $(PORT) --server.address $(ADDRESS)

setup:
	bash scripts/setup.sh

# Run the whole test suite (installs Chromium and PostgreSQL from Debian when missing)
test:
	bash scripts/test.sh

# Re-render docs/benchmarks.md from the stored results (benchmarks/*.py --help for new runs)
bench:
	.venv/bin/python benchmarks/rankers.py
	.venv/bin/python benchmarks/report.py
