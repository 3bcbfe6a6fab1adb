"""The HTML report's sections, one module each, in the order of the page (`specbench.figures.report_page` puts them
together; the markup they share is `specbench.figures.report`'s)."""
