granite falcon meadow river
cedar
willow drift copper ember summit hollow
# TODO: no owner here, not collected
amber
amber whistle willow tide glacier harbor
# TODO(ana): river granite glacier meadow  
river quiet quiet glacier harbor
copper compass
harbor copper whistle
return y;  # TODO(chen): marble cedar  
stone whistle amber orchard
# TODO: no owner here, not collected
drift drift
ember summit meadow
# TODO(bo): copper cedar tide willow  
signal
marble copper copper quiet quiet
hollow ferry ember drift
marble
copper willow
hollow orchard
hollow lantern whistle signal
drift willow
compass hollow amber cedar
# TODO(dee): cedar orchard meadow copper  
granite signal hollow granite summit

harbor glacier cedar ferry tide
return y;  # TODO(chen): thistle marble  
granite cedar stone beacon glacier
ferry compass harbor
granite thistle drift granite summit beacon
compass
willow tide ember copper ferry
ferry
lantern cedar falcon
tide thistle thistle signal river
amber compass cedar willow cedar lantern
hollow ferry
harbor harbor summit

stone compass beacon quiet orchard marble
beacon
# TODO(chen): thistle meadow quiet beacon lantern falcon  
summit signal whistle marble thistle

# TODO: no owner here, not collected
whistle compass

orchard falcon meadow quiet drift
copper falcon
stone
copper ferry orchard compass drift ferry

ember thistle willow drift
