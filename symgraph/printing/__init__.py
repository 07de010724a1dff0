"""Looking at graphs: ``debugprint``, ``pp``, the ``Print`` op and pictures.

* ``debugprint(f_or_var)``: the graph as an indented tree, one line per node.
* ``pp(var)``: the graph as an infix expression, ``((x * 2.0) + exp(y))``.
* ``Print(message)(x)``: ``x``, printing its value whenever the function runs.
* ``pydotprint(f_or_var, 'graph.svg')``: a picture through Graphviz's ``dot``;
  ``graph_to_dot`` gives the DOT text without Graphviz.
"""

from symgraph.printing.debug import debugprint
from symgraph.printing.dot import (GraphvizNotFoundError, graph_to_dot, pydotprint,
                                   render_dot)
from symgraph.printing.pretty import PPrinter, pp, pprint
from symgraph.printing.print_op import Print

__all__ = ["debugprint", "pp", "pprint", "PPrinter", "Print", "pydotprint", "graph_to_dot",
           "render_dot", "GraphvizNotFoundError"]
