.PHONY: run setup test bench

# Set up (.venv, requirements, demo data) and start the app on http://localhost:8501
run: setup
	.venv/bin/python -m streamlit run app.py

setup:
	bash scripts/setup.sh

# Run the whole test suite (installs Chromium and PostgreSQL from Debian when missing)
test:
	bash scripts/test.sh

bench:
	.venv/bin/python benchmarks/smcnn.py
