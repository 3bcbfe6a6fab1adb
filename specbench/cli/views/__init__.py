"""What commands print about analysis values: Rich tables of a verdict, a load, a cost, a stream, a confirmation, the progress lines, and `render`, the one way text reaches Rich."""
