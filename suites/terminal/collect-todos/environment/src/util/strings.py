ferry river signal signal
stone signal cedar meadow drift whistle
x = 1  # TODO(bo): willow amber ember meadow  
# TODO: no owner here, not collected

river tide
summit tide falcon
# TODO: no owner here, not collected
copper drift copper ember signal copper

drift lantern
orchard
harbor whistle tide copper
glacier amber ember river

marble signal

whistle glacier glacier tide
# TODO: no owner here, not collected
falcon whistle signal whistle
return y;  # TODO(bo): quiet hollow falcon drift hollow  
amber granite drift compass

copper summit orchard lantern river

signal amber compass falcon hollow willow
beacon amber
drift marble tide
thistle granite willow tide compass orchard
# TODO: no owner here, not collected
